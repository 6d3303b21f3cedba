"""HTTP routes of the backend: requests to the request path, results to responses. `router` holds OpenAI's routes,
served under /v1 and, as OVMS does, /v3; `service_router` the probes, vLLM's tokenizer routes and OVMS's config."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ovgenai_common.cancellation import cancel_on_disconnect
from ovgenai_common.errors import invalid
from ovgenai_common.health import Readiness, health_router
from ovgenai_common.responses_protocol import ResponsesRequest
from ovgenai_common.sse import STREAMING_RESPONSES, dumps, sse_response

from .api import anthropic_messages, chat, completions, responses
from .api.anthropic_protocol import CountTokensRequest, MessagesRequest
from .api.model_status import config_status, model_card, model_list
from .api.protocol import ChatCompletionRequest, CompletionRequest, DetokenizeRequest, TokenizeRequest
from .api.tokenization import detokenize, tokenize, tokenizer_info
from .deps import ClientDep, LifecycleDep, StateDep, get_state
from .engine.contract.types import EngineState

router = APIRouter()
service_router = APIRouter()


def _json(payload: dict) -> Response:
    return Response(dumps(payload), media_type="application/json")


@router.post("/chat/completions", responses=STREAMING_RESPONSES)
async def chat_completions(body: ChatCompletionRequest, request: Request, state: StateDep,
                           client: ClientDep) -> Response:
    prep = await chat.prepare(state, body, client)
    if body.stream:
        return sse_response(chat.streamed(body, prep, state.metrics))
    return _json(await cancel_on_disconnect(request, chat.answer(body, prep, state.metrics)))


@router.post("/completions", responses=STREAMING_RESPONSES)
async def text_completions(body: CompletionRequest, request: Request, state: StateDep,
                           client: ClientDep) -> Response:
    preps = await completions.prepare(state, body, client)
    if body.stream:
        if len(preps) > 1:
            raise invalid("Streaming accepts a single prompt.", "prompt")
        return sse_response(completions.streamed(body, preps[0], state.metrics))
    return _json(await cancel_on_disconnect(request, completions.answer(body, preps, state.metrics)))


@router.post("/responses", responses=STREAMING_RESPONSES)
async def create_response(body: ResponsesRequest, request: Request, state: StateDep, client: ClientDep) -> Response:
    """OpenAI's Responses API, answered on the chat path (api/responses.py)."""
    turn = await responses.prepare(state, body, client)
    if body.stream:
        return sse_response(responses.streamed(state, turn))
    return _json(await cancel_on_disconnect(request, responses.answer(state, turn)))


@router.get("/responses/{response_id}")
async def get_response(response_id: str, state: StateDep) -> Response:
    return _json(state.responses.response(response_id))


@router.delete("/responses/{response_id}")
async def delete_response(response_id: str, state: StateDep) -> dict:
    return state.responses.deleted(response_id)


@router.post("/messages", responses=STREAMING_RESPONSES)
async def create_message(body: MessagesRequest, request: Request, state: StateDep, client: ClientDep) -> Response:
    """Anthropic's Messages API, answered on the chat path (api/anthropic_messages.py)."""
    turn = await anthropic_messages.prepare(state, body, client)
    if body.stream:
        return sse_response(anthropic_messages.streamed(state, turn))
    return _json(await cancel_on_disconnect(request, anthropic_messages.answer(state, turn)))


@router.post("/messages/count_tokens")
async def count_message_tokens(body: CountTokensRequest, state: StateDep) -> Response:
    return _json(await anthropic_messages.count_tokens(state, body))


@router.get("/models")
async def models(state: StateDep) -> dict:
    return model_list(state)


@router.get("/models/{model:path}")
async def model(model: str, state: StateDep) -> dict:
    return model_card(state.models.named(model), state.started_at)


async def readiness(request: Request) -> Readiness:
    """Ready when every served model is and its admission moves (request/fair_share.py's watchdog); OPEA's body lists
    each model's state."""
    state = get_state(request)
    states = {model.name: model.runtime.health() for model in state.models}
    reasons = {name: h.message or h.state.value for name, h in states.items() if not h.ready}
    for model in state.models:
        stalled = state.admission_stalled(model)
        if stalled:
            reasons[model.name] = stalled
    reason = "; ".join(f"{name}: {why}" for name, why in reasons.items())
    loading = bool(reasons) and all(states[name].state is EngineState.LOADING for name in reasons)
    return Readiness(not reasons, reason, loading, opea={"Models": {n: h.state.value for n, h in states.items()}})


service_router.include_router(health_router("llm_openvino", readiness))


# KServe's health routes, as OVMS answers them (status only: 200, or 503 until every model is ready).
@service_router.get("/v2/health/live", include_in_schema=False)
async def kserve_live() -> Response:
    return Response(status_code=200)


@service_router.get("/v2/health/ready", include_in_schema=False)
async def kserve_ready(request: Request) -> Response:
    return Response(status_code=200 if (await readiness(request)).ready else 503)


# vLLM's tokenizer routes, where vLLM serves them (beside /v1, not under it). Tokenizing runs on a worker thread: a
# long prompt must not stall the streams on the event loop.
@service_router.post("/tokenize")
async def tokenize_route(body: TokenizeRequest, state: StateDep) -> Response:
    return _json(await asyncio.to_thread(tokenize, state.models, body))


@service_router.post("/detokenize")
async def detokenize_route(body: DetokenizeRequest, state: StateDep) -> Response:
    return _json(await asyncio.to_thread(detokenize, state.models, body))


@service_router.get("/tokenizer_info")
async def tokenizer_info_route(state: StateDep, model: str | None = None) -> Response:
    """vLLM's: the tokenizer's special tokens and chat template (`model` names one when several are served)."""
    return _json(tokenizer_info(state.models, model))


@service_router.get("/v1/config")
async def config(state: StateDep, lifecycle: LifecycleDep) -> dict:
    """OVMS's model status: each model's state, and why one failed (api/model_status.py)."""
    return config_status(state, lifecycle.reload_failures if lifecycle is not None else {})


@service_router.post("/v1/config/reload")
async def reload_config(state: StateDep, lifecycle: LifecycleDep) -> Response:
    """OVMS's reload: the repository read again, new and changed models loaded and removed ones unloaded (the others
    serving meanwhile); answered once the loads have ended, with the status: 201 when something changed."""
    if lifecycle is None:
        raise invalid("This server was given its models in code; there is no repository to reload.")
    changed = await lifecycle.reload()
    await lifecycle.settled()
    return Response(dumps(config_status(state, lifecycle.reload_failures)), status_code=201 if changed else 200,
                    media_type="application/json")
