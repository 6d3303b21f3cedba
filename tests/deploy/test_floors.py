"""The microservices stand on four floors (docs/architecture.md, "The floors of a service"): settings, protocol
and metrics; adapters; logic without HTTP; routes and what they depend on; with app.py, which wires them, on top.
Nothing imports a module on a floor above its own, and no modules import each other in a circle. Read from the
source's imports (ast), sub-packages included, so a misfiled import fails here in a second instead of in a review."""

from __future__ import annotations

import ast

import pytest

from tests.support.servers import ROOT

ENGINE, BASE, ADAPTERS, LOGIC, HTTP, WIRING = range(6)
# The backend's engine package is the floor under everything else of it: it imports nothing of the server above.
BACKEND_ENGINE = ("autotune", "backlog", "cache_eviction", "chat_template", "detokenizer", "fan_out",
                  "generation_config", "grammar", "grammar_checks", "grammars", "interface", "kv_cache", "loop",
                  "messages", "placement", "prefix_gate", "process", "prompt_builder", "runtime", "spec", "stop_text",
                  "tuning", "types", "weight_pages", "weights")
FLOORS = {
    "backend": {
        **{f"engine.{name}": ENGINE for name in BACKEND_ENGINE},
        **dict.fromkeys(("settings", "protocol", "anthropic_protocol", "metrics", "tags", "reasoning", "tool_calls",
                         "described_tools",
                         "images", "chunks", "devices", "cli", "model_specs", "source", "lora", "torchserve.settings",
                         "torchserve.checkpoint"), BASE),
        "models": ADAPTERS,
        **dict.fromkeys(("chat_output", "tool_choice", "sampling", "structured_output", "admission", "fair_share",
                         "prompts", "logprobs", "prepared", "accounting", "stream_runner", "state", "chat",
                         "completions", "responses", "anthropic_messages", "tokenization", "torchserve.requests",
                         "lifecycle", "model_status"), LOGIC),
        **dict.fromkeys(("deps", "router", "torchserve.http", "torchserve.grpc_server"), HTTP),
        **dict.fromkeys(("app", "__main__", "torchserve.__main__"), WIRING),
    },
    "llm": {"settings": BASE, "protocol": BASE, "metrics": BASE, "replicas": BASE, "service": LOGIC, "deps": HTTP,
            "router": HTTP, "app": WIRING, "__main__": WIRING},
    "embedding": {"settings": BASE, "protocol": BASE, "metrics": BASE, "batcher": ADAPTERS, "embedder": ADAPTERS,
                  "fast_tokenizer": ADAPTERS, "model": ADAPTERS, "model_process": ADAPTERS, "precision": ADAPTERS,
                  "service": LOGIC, "deps": HTTP, "router": HTTP, "app": WIRING, "__main__": WIRING},
    "gateway": {"settings": BASE, "protocol": BASE, "metrics": BASE,
                "chroma": ADAPTERS, "versions": ADAPTERS, "store": ADAPTERS, "rerank": ADAPTERS,
                "streams": ADAPTERS, "headers": ADAPTERS,
                "ingestion.pool": ADAPTERS, "ingestion.files": ADAPTERS, "ingestion.sections": ADAPTERS,
                "ingestion.html_text": ADAPTERS, "ingestion.readers": ADAPTERS, "ingestion.decoding": ADAPTERS,
                "ingestion.links": ADAPTERS,
                "rag": LOGIC, "responses": LOGIC, "ingestion.ingest": LOGIC, "validation": LOGIC,
                "deps": HTTP, "router": HTTP, "dataprep": HTTP, "app": WIRING, "__main__": WIRING},
    "stack": {"services": BASE, "ports": BASE, "supervisor": ADAPTERS, "launcher": LOGIC, "__main__": WIRING},
}


# Where each package lives and the name it is imported by.
PACKAGES = {"backend": ("dependency/ovgenai_server", "ovgenai_server")} | {
    name: (f"microservices/{name}", f"microservices.{name}") for name in FLOORS if name != "backend"}
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


def test_sub_packages_and_their_relative_imports_are_read():
    graph = imports("gateway")
    assert {"ingestion.files", "ingestion.readers", "ingestion.pool", "store"} <= graph["ingestion.ingest"]
    assert "ingestion.files" in graph["ingestion.links"] and "settings" in graph["ingestion.links"]
