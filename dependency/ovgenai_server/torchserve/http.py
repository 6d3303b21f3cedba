"""TorchServe's HTTP surface: inference (`/predictions/{model}`, `/ping`), management (`/models`) and metrics apps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.responses import Response

from ovgenai_common.app import secure
from ovgenai_common.body import is_json
from ovgenai_common.errors import APIError, ErrorKind, install_error_handlers, invalid

from ..deps import ClientDep, StateDep
from ..state import ServerState
from .requests import generate, input_value, ping_status, prepare, response_timeout
from .settings import TorchServeSettings, address

logger = logging.getLogger(__name__)


async def timed(stream: AsyncGenerator[str, None], timeout: float) -> AsyncGenerator[str, None]:
    """The stream, ended (and its generation aborted, freeing its KV cache) `timeout` seconds after it started.
    Only the wait for the engine is timed: a deadline that fell while the caller was writing would cancel the caller
    instead of ending the stream."""
    deadline = asyncio.get_running_loop().time() + timeout
    try:
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    text = await anext(stream)
            except StopAsyncIteration:
                return
            except TimeoutError:
                logger.warning("a generation ran past default_response_timeout (%.0f s) and was ended", timeout)
                return
            yield text
    finally:
        await stream.aclose()


async def ended_on_failure(stream: AsyncGenerator[str, None]) -> AsyncGenerator[str, None]:
    """An HTTP response has started: an engine failure can only end it, without the end-of-stream token."""
    try:
        async for text in stream:
            yield text
    except APIError as error:
        logger.warning("a /predictions stream failed: %s", error.message)
    finally:
        await stream.aclose()


async def _payload(request: Request) -> dict[str, Any]:
    """JSON, a form, or (as TorchServe also takes it) a plain-text body that is the prompt itself."""
    header = request.headers.get("content-type", "")
    kind = header.split(";")[0].strip().lower()
    if header and is_json(header.encode("latin-1")):  # as the body gate and FastAPI tell JSON (ovgenai_common/body.py)
        try:
            payload = await request.json()
        except ValueError as error:
            raise invalid(f"The body is not valid JSON: {error}.") from error
        if not isinstance(payload, dict):
            raise invalid("The JSON body must be an object with 'text'.")
        return payload
    if kind in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.form()
        return {key: _form_value(key, value) for key, value in form.items()}
    body = await request.body()
    try:
        return {"text": body.decode("utf-8")}
    except UnicodeDecodeError as error:
        raise invalid("The body is not UTF-8 text.") from error


def _form_value(key: str, value: Any) -> Any:
    if not isinstance(value, str):
        raise invalid(f"'{key}' must be a form field, not a file.", key)
    return input_value(key, value)


def get_torchserve_settings(request: Request) -> TorchServeSettings:
    return request.app.state.torchserve


TorchServeSettingsDep = Annotated[TorchServeSettings, Depends(get_torchserve_settings)]
# TorchServe's inference routes, beside the backend's own on the inference port.
router = APIRouter()


@router.post("/predictions/{model_name}", response_class=StreamingResponse,
             responses={200: {"content": {"text/plain": {}}, "description": "The generated text in chunks, ending "
                              "with the end-of-stream token."}})
async def predictions(model_name: str, request: Request, state: StateDep, settings: TorchServeSettingsDep,
                      client: ClientDep) -> StreamingResponse:
    prep = await prepare(state, settings, model_name, await _payload(request), client)
    stream = timed(generate(state, settings, prep), response_timeout(prep.model.facts.folder, settings))
    return StreamingResponse(ended_on_failure(stream), media_type="text/plain; charset=utf-8")


@router.get("/ping")
async def ping(state: StateDep) -> JSONResponse:
    return _ping(state)


def _ping(state: ServerState) -> JSONResponse:
    status = ping_status(state)
    return JSONResponse({"status": status}, status_code=200 if status == "Healthy" else 500)


MODEL_VERSION = "1.0"  # the one version of each model served


def management_app(state: ServerState, settings: TorchServeSettings) -> FastAPI:
    app = FastAPI(title="TorchServe management API", openapi_url=None)
    install_error_handlers(app)
    secure(app, settings.backend(), bound_host=address(settings.management_address)[0])

    @app.get("/ping")
    async def ping() -> JSONResponse:
        return _ping(state)

    @app.get("/models")
    async def models() -> dict:
        return {"models": [{"modelName": model.name, "modelUrl": model.facts.source} for model in state.models]}

    @app.get("/models/{model_name}")
    @app.get("/models/{model_name}/{version}")
    async def describe(model_name: str, version: str | None = None) -> list:
        return describe_model(state, settings, model_name, version)

    return app


def describe_model(state: ServerState, settings: TorchServeSettings, model_name: str, version: str | None) -> list:
    """TorchServe's description of a served model (its one version; "all" lists them)."""
    model = state.models.get(model_name)
    if model is None:
        raise APIError(ErrorKind.NOT_FOUND, f"Model not found: {model_name}", "model_name")
    if version not in (None, MODEL_VERSION, "all"):
        raise APIError(ErrorKind.NOT_FOUND, f"Model version: {version} does not exist for model: {model_name}",
                       "version")
    facts, runtime = model.facts, model.runtime
    return [{
        "modelName": model_name, "modelVersion": MODEL_VERSION, "modelUrl": facts.source,
        "runtime": "openvino-genai", "minWorkers": 1, "maxWorkers": 1,
        # Continuous batching: every request in flight shares the engine's steps, up to max_num_seqs.
        "batchSize": facts.max_num_seqs, "maxBatchDelay": 0,
        "maxRetryTimeoutInSec": 0, "responseTimeout": response_timeout(facts.folder, settings),
        "loadedAtStartup": True,
        "workers": [{"id": "engine", "status": "READY" if runtime.health().ready else "UNLOADING",
                     "memoryUsage": 0, "gpu": facts.device.startswith("GPU")}],
        "jobQueueStatus": {"remainingCapacity": max(facts.max_num_seqs - runtime.in_flight(), 0),
                           "pendingRequests": runtime.in_flight()},
    }]


def metrics_app(registry: CollectorRegistry, settings: TorchServeSettings) -> FastAPI:
    """The backend's metrics; with an API key, Prometheus sends it (a scrape job's `authorization`)."""
    app = FastAPI(title="TorchServe metrics API", openapi_url=None)
    install_error_handlers(app)
    secure(app, settings.backend(), bound_host=address(settings.metrics_address)[0])

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app
