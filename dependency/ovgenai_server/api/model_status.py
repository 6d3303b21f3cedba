"""What /v1/models and /v1/config say of each model: those served, and those loading, failed (with the reason) or
unloaded while idle (lifecycle.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from ..models.registry import ServedModel
from ..state import ServerState


def model_card(model: ServedModel, started_at: float) -> dict[str, Any]:
    # What a model reads, as OpenRouter's model list says it: images for a vision-language model.
    modalities = ["text", "image"] if model.facts.vision else ["text"]
    # The sampling defaults a request's unset fields take (models/generation_defaults.py): {} is the engine's own.
    return {"id": model.name, "object": "model", "created": int(started_at), "owned_by": "ovgenai",
            "input_modalities": modalities, "generation_config": model.facts.generation.shown()}


def model_list(state: ServerState) -> dict[str, Any]:
    """vLLM's list, each model with its state (as llama.cpp's router lists them): served ones `AVAILABLE` (or their
    engine's own state while it restarts), the others as lifecycle.py left them. A LoRA adapter as vLLM lists one:
    its `root` the adapter, its `parent` the model it adapts."""
    served = [{**model_card(model, state.started_at), **_lineage(model), "max_model_len": model.facts.max_context,
               "status": {"value": model.runtime.health().state.value}} for model in state.models]
    others = [{"id": name, "object": "model", "created": int(state.started_at), "owned_by": "ovgenai",
               "status": {"value": status.state, "message": status.message}}
              for name, status in state.models.statuses.items()]
    return {"object": "list", "data": served + others}


def _lineage(model: ServedModel) -> dict[str, Any]:
    if model.facts.parent is None:
        return {"root": model.name}
    return {"root": model.facts.source, "parent": model.facts.parent}


def config_status(state: ServerState, reload_failures: dict[str, str]) -> dict[str, Any]:
    """OVMS's model status, with what autotune chose on this CPU (engine/engine_process/autotune.py); a served model
    whose new version failed to load says why."""
    out: dict[str, Any] = {}
    for served in state.models:
        health = served.runtime.health()
        message = health.message or reload_failures.get(served.name, "") or "OK"
        out[served.name] = _version(health.state.value, "OK" if health.ready else "UNAVAILABLE", message)
        if served.runtime.tuning is not None:
            out[served.name]["autotune"] = msgspec.to_builtins(served.runtime.tuning)
    for name, status in state.models.statuses.items():
        code = {"FAILED": "FAILED_PRECONDITION", "UNLOADED": "OK"}.get(status.state, "UNAVAILABLE")
        out[name] = _version(status.state, code, status.message)
    return out


def _version(state: str, code: str, message: str) -> dict[str, Any]:
    return {"model_version_status": [{"version": "1", "state": state,
                                      "status": {"error_code": code, "error_message": message}}]}
