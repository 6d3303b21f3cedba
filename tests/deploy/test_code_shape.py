"""The product's code stays in small rooms: no file over 400 lines, no class over 250, no function over 60, no modules
that import each other in a circle (type-only imports included), and every module with logic has a test file of its own
name in the mirrored folder of tests/. Read from the source (ast): a misfiled module fails here in a second."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.servers import ROOT

MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 250
# Each product package and the folder of tests that mirrors it.
PACKAGES = {
    "dependency/ovgenai_server": "tests/ovgenai_server",
    "ovgenai_common": "tests/ovgenai_common",
    "ovgenai_models": "tests/ovgenai_models",
    "ovgenai_services/llm": "tests/llm",
    "ovgenai_services/embedding": "tests/embedding",
    "ovgenai_services/gateway": "tests/gateway",
    "ovgenai_services/stack": "tests/stack",
}
GENERATED = ("proto",)  # protoc's output (make proto)
# What decides: a function that branches or loops. Declarations (settings, request models, metrics, dependencies that
# read app.state) have none.
LOGIC = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match, ast.comprehension, ast.IfExp, ast.With,
         ast.AsyncWith)


def sources() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
            if not set(path.relative_to(ROOT).parts) & set(GENERATED)]


def module_name(path: Path) -> str:
    relative = path.relative_to(ROOT / "dependency" if path.is_relative_to(ROOT / "dependency") else ROOT)
    parts = relative.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_file_is_over_the_limit():
    long = [f"{path.relative_to(ROOT)}: {n} lines" for path in sources()
            if (n := len(path.read_text().splitlines())) > MAX_FILE_LINES]
    assert not long, f"split these by concern (at most {MAX_FILE_LINES} lines): {long}"


def test_no_function_is_over_the_limit():
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
        for path in sources() for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"split these (at most {MAX_FUNCTION_LINES} lines): {long}"


def test_no_class_is_over_the_limit():
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
        for path in sources() for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES
    ]
    assert not long, f"split these by concern (at most {MAX_CLASS_LINES} lines): {long}"


def imported(path: Path, modules: set[str]) -> set[str]:
    """The product modules `path` imports, at any depth of its code (type-only imports included)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            candidates = [f"{base}.{alias.name}" for alias in node.names] + [base]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(next((c for c in (candidate, candidate.rpartition(".")[0]) if c in modules), None)
                     for candidate in candidates)
    return found - {None, name}


def test_no_import_circles():
    paths = {module_name(path): path for path in sources()}
    graph = {name: imported(path, set(paths)) for name, path in paths.items()}
    # A package imports its own submodules by design (its __init__): circles through an __init__ are not counted.
    graph = {name: {m for m in deps if not name.startswith(m + ".")} for name, deps in graph.items()}
    done: set[str] = set()
    circles = []

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            circles.append(" -> ".join((*path[path.index(module):], module)))
            return
        if module not in done:
            for name in sorted(graph[module]):
                visit(name, (*path, module))
            done.add(module)

    for module in sorted(graph):
        visit(module, ())
    assert not circles


def has_logic(path: Path) -> bool:
    return any(isinstance(inner, LOGIC) for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) for inner in ast.walk(node))


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_module_with_logic_has_a_test_file_of_its_name(package):
    missing = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if path.name == "__init__.py" or set(path.relative_to(ROOT).parts) & set(GENERATED) or not has_logic(path):
            continue
        folder = ROOT / PACKAGES[package] / path.parent.relative_to(ROOT / package)
        name = "test_main.py" if path.stem == "__main__" else f"test_{path.stem}.py"
        if not ((folder / name).is_file() or (folder / "system" / name).is_file()):
            missing.append(f"{path.relative_to(ROOT)} -> {(folder / name).relative_to(ROOT)}")
    assert not missing
