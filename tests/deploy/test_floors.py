"""The microservices stand on four floors (docs/architecture.md, "The floors of a service"): settings, protocol
and metrics; adapters; logic without HTTP; routes and what they depend on; with app.py, which wires them, on top.
Nothing imports a module on a floor above its own, and no modules import each other in a circle. Read from the
source's imports (ast), sub-packages included, so a misfiled import fails here in a second instead of in a review."""

from __future__ import annotations

import ast

import pytest

from tests.support.servers import ROOT

ENGINE, BASE, ADAPTERS, LOGIC, HTTP, WIRING = range(6)
# The backend's floors by package (docs/architecture.md): the engine under everything; the served models, tools and
# reasoning beside the settings; a request's way in, then its way out, then the APIs that sequence them; the routes;
# the wiring. Only its root modules, the TorchServe front and the APIs' request models (read by the request path
# below them) are named one by one.
BACKEND_PACKAGES = {"engine": ENGINE, "models": BASE, "tools": BASE, "request": ADAPTERS, "output": LOGIC,
                    "api": LOGIC}
BACKEND_ROOT = {"api.protocol": BASE, "api.anthropic_protocol": BASE, "settings": BASE, "metrics": BASE, "cli": BASE,
                "state": LOGIC, "lifecycle": LOGIC, "deps": HTTP, "router": HTTP, "app": WIRING, "__main__": WIRING,
                "torchserve.settings": BASE, "torchserve.checkpoint": BASE, "torchserve.requests": LOGIC,
                "torchserve.http": HTTP, "torchserve.grpc_server": HTTP, "torchserve.__main__": WIRING}
# Inside the engine, by the process a module runs in: the contract both read; neither process's modules import the
# other's, but for the one place the API process names the engine process's entry point to start it.
ENGINE_SIDES = {"engine.contract": 0, "engine.api_process": 1, "engine.engine_process": 1}
ENGINE_STARTS = ("engine.api_process.supervisor", "engine.engine_process.entry")


def backend_floor(module: str) -> int:
    return BACKEND_ROOT.get(module, BACKEND_PACKAGES.get(module.split(".")[0], WIRING + 1))


FLOORS = {
    "llm": {"settings": BASE, "protocol": BASE, "metrics": BASE, "replicas": BASE, "service": LOGIC, "deps": HTTP,
            "router": HTTP, "app": WIRING, "__main__": WIRING},
    "embedding": {"settings": BASE, "protocol": BASE, "metrics": BASE, "inputs": BASE, "answers": BASE,
                  "prompts": BASE,
                  "batcher": ADAPTERS, "embedder": ADAPTERS,
                  "fast_tokenizer": ADAPTERS, "model": ADAPTERS, "model_process": ADAPTERS, "precision": ADAPTERS,
                  "service": LOGIC, "deps": HTTP, "router": HTTP, "app": WIRING, "__main__": WIRING},
    "gateway": {"settings": BASE, "protocol": BASE, "metrics": BASE,
                "chroma": ADAPTERS, "versions": ADAPTERS, "store": ADAPTERS, "rerank": ADAPTERS, "embedding": ADAPTERS,
                "streams": ADAPTERS, "headers": ADAPTERS,
                "ingestion.pool": ADAPTERS, "ingestion.files": ADAPTERS, "ingestion.sections": ADAPTERS,
                "ingestion.html_text": ADAPTERS, "ingestion.readers": ADAPTERS, "ingestion.decoding": ADAPTERS,
                "ingestion.links": ADAPTERS, "ingestion.office": ADAPTERS, "ingestion.records": ADAPTERS,
                "indices": ADAPTERS,
                "rag": LOGIC, "responses": LOGIC, "ingestion.ingest": LOGIC, "validation": LOGIC,
                "deps": HTTP, "router": HTTP, "dataprep": HTTP, "app": WIRING, "__main__": WIRING},
    "stack": {"services": BASE, "ports": BASE, "supervisor": ADAPTERS, "launcher": LOGIC, "__main__": WIRING},
}


# Where each package lives and the name it is imported by.
PACKAGES = {"backend": ("dependency/ovgenai_server", "ovgenai_server")} | {
    name: (f"ovgenai_services/{name}", f"ovgenai_services.{name}") for name in FLOORS}
GENERATED = "proto"  # TorchServe's protoc stubs (make proto)


def modules(package: str) -> dict[str, ast.Module]:
    """Each module of the package, sub-packages' included, by its dotted name within the package."""
    root = ROOT / PACKAGES[package][0]
    return {".".join(path.relative_to(root).with_suffix("").parts): ast.parse(path.read_text())
            for path in sorted(root.rglob("*.py"))
            if path.stem != "__init__" and GENERATED not in path.relative_to(root).parts}


def imports(package: str) -> dict[str, set[str]]:
    """Each module of the package and the modules of the same package it imports."""
    found = modules(package)
    prefix = PACKAGES[package][1]

    def resolve(module: str, name: str) -> str:
        """`from <module> import <name>`: the submodule `name` if there is one, else `module` itself."""
        inner = f"{module}.{name}" if module else name
        return inner if inner in found else module

    graph: dict[str, set[str]] = {}
    for name, tree in found.items():
        parts = name.split(".")[:-1]  # the sub-package the module is in
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = parts[:len(parts) - node.level + 1]
                module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix):
                module = node.module.removeprefix(prefix).lstrip(".")
            else:
                continue
            names.update(resolve(module, alias.name) for alias in node.names)
        graph[name] = names & set(found)  # a package's own __init__ (or generated stubs) is no module here
    return graph


def floors_of(package: str, graph: dict[str, set[str]]) -> dict[str, int]:
    return {module: backend_floor(module) for module in graph} if package == "backend" else FLOORS[package]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_module_has_a_floor_and_imports_none_above_it(package):
    graph = imports(package)
    floors = floors_of(package, graph)
    assert set(graph) == set(floors), "a module was added or removed: give it a floor here and in the docs"
    unplaced = [module for module, floor in floors.items() if floor > WIRING]
    assert not unplaced, "a module outside the backend's packages: give it a floor here and in the docs"
    upward = [f"{module} imports {name}" for module, names in graph.items() for name in names
              if floors[name] > floors[module]]
    assert not upward


def test_the_engine_s_two_processes_share_only_the_contract():
    def side(module: str) -> str | None:
        return next((name for name in ENGINE_SIDES if module.startswith(name + ".")), None)

    graph = imports("backend")
    engine = {module for module in graph if module.startswith("engine.")}
    assert all(side(module) for module in engine), "an engine module outside contract/, api_process/, engine_process/"
    crossing = [f"{module} imports {name}" for module in engine for name in graph[module]
                if side(name) != side(module) and ENGINE_SIDES[side(name)] >= ENGINE_SIDES[side(module)]
                and (module, name) != ENGINE_STARTS]
    assert not crossing


@pytest.mark.parametrize("package", sorted(PACKAGES))
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


def test_sub_packages_and_their_relative_imports_are_read():
    graph = imports("gateway")
    assert {"ingestion.files", "ingestion.readers", "ingestion.pool", "store"} <= graph["ingestion.ingest"]
    assert "ingestion.files" in graph["ingestion.links"] and "settings" in graph["ingestion.links"]
