"""The microservices stand on four floors (docs/architecture.md, "The floors of a service"): settings, protocol
and metrics; adapters; logic without HTTP; routes and what they depend on; with app.py, which wires them, on top.
Nothing imports a module on a floor above its own, and no modules import each other in a circle. Read from the
source's imports (ast), so a misfiled import fails here in a second instead of in a review."""

from __future__ import annotations

import ast

import pytest

from tests.support.servers import ROOT

BASE, ADAPTERS, LOGIC, HTTP, WIRING = range(5)
FLOORS = {
    "llm": {"settings": BASE, "protocol": BASE, "metrics": BASE, "replicas": BASE, "service": LOGIC, "deps": HTTP,
            "router": HTTP, "app": WIRING, "__main__": WIRING},
    "embedding": {"settings": BASE, "protocol": BASE, "metrics": BASE, "batcher": ADAPTERS, "model": ADAPTERS,
                  "precision": ADAPTERS, "service": LOGIC, "deps": HTTP, "router": HTTP, "app": WIRING,
                  "__main__": WIRING},
    "gateway": {"settings": BASE, "protocol": BASE, "metrics": BASE, "sections": ADAPTERS, "html_text": ADAPTERS,
                "documents": ADAPTERS, "decoding": ADAPTERS, "links": ADAPTERS, "store": ADAPTERS,
                "rerank": ADAPTERS, "ingest_pool": ADAPTERS, "streams": ADAPTERS, "headers": ADAPTERS,
                "rag": LOGIC, "ingestion": LOGIC, "validation": LOGIC, "deps": HTTP, "router": HTTP,
                "dataprep": HTTP, "app": WIRING, "__main__": WIRING},
}


def imports(package: str) -> dict[str, set[str]]:
    """Each module of the package and the modules of the same package it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "microservices" / package).glob("*.py")):
        if path.stem == "__init__":
            continue
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names.update([node.module] if node.module else [alias.name for alias in node.names])
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"microservices.{package}."):
                names.add(node.module.rsplit(".", 1)[1])
        found[path.stem] = names
    return found


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_every_module_has_a_floor_and_imports_none_above_it(package):
    floors, graph = FLOORS[package], imports(package)
    assert set(graph) == set(floors), "a module was added or removed: give it a floor here and in the docs"
    upward = [f"{module} imports {name}" for module, names in graph.items() for name in names
              if floors[name] > floors[module]]
    assert not upward


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_no_circles(package):
    graph = imports(package)
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join((*path, module))
        if module not in done:
            for name in graph[module]:
                visit(name, (*path, module))
            done.add(module)

    for module in graph:
        visit(module, ())
