"""The backend's app factory and its one start-up path.

`serve()` is what both entry points run (`python -m ovgenai_server` and TorchServe's front): the models' engine
options are resolved and their devices checked once, before anything loads (a refusal exits 2 with the reason);
`create_app()` loads each model in its lifespan, then the fronts' own hooks (TorchServe's extra ports),
and stops them in the reverse order on shutdown (the engines drained last); a model that cannot load at all stops
the server with exit code 3.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from fastapi import APIRouter, FastAPI
from prometheus_client import CollectorRegistry

from ovgenai_common.app import bound, create_service_app, run_app
from ovgenai_common.response_store import ResponseStore

from .engine.api_process.placement import ServingCore
from .engine.contract.spec import ModelSpec
from .lifecycle import Lifecycle
from .metrics import ServerMetrics
from .models.registry import ModelRegistry, ServedModel
from .request.admission import Limits
from .router import router, service_router
from .settings import BackendSettings
from .state import ServerState

logger = logging.getLogger(__name__)

# Run once the engines have started, inside the app's lifespan: a front's own servers (TorchServe's ports, gRPC).
LifespanHook = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def create_app(
    settings: BackendSettings,
    models: Sequence[ServedModel] | None = None,
    *,
    specs: Sequence[ModelSpec] | None = None,
    hooks: Sequence[LifespanHook] = (),
    routers: Sequence[APIRouter] = (),
) -> FastAPI:
    """The app. `models` is injected by unit tests; by default an OpenVINO model is loaded per model of `specs`
    (resolved from `settings` when not given)."""
    registry = CollectorRegistry()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        lifecycle = app.state.lifecycle = await _start_models(app, settings, specs) if models is None else None
        try:
            async with AsyncExitStack() as fronts:
                for hook in hooks:
                    await fronts.enter_async_context(hook(app))
                yield
        finally:
            if lifecycle is not None:
                await lifecycle.close()
                served = list(app.state.server.models)
                await asyncio.gather(*(model.runtime.close() for model in served), return_exceptions=True)

    app = create_service_app(settings, title="OpenVINO GenAI server", service_name="ovgenai-server",
                             lifespan=lifespan, registry=registry)
    served = ModelRegistry({model.name: model for model in models or ()})
    state = app.state.server = ServerState(served, Limits.of(settings), ServerMetrics(
        registry, served.runtimes, lambda name: state.queued(name), lambda name: state.stalls(name)),
        responses=ResponseStore(settings.responses_store_size, settings.responses_store_ttl), seed=settings.seed)
    app.state.registry = registry  # other fronts (TorchServe's metrics port) serve the same metrics
    app.state.fatal_error = None
    app.include_router(router, prefix="/v1")
    app.include_router(router, prefix="/v3")
    app.include_router(service_router)
    for extra in routers:
        app.include_router(extra)
    return app


async def _start_models(app: FastAPI, settings: BackendSettings, specs: Sequence[ModelSpec] | None) -> Lifecycle:
    """The models loaded (one that does not fit in memory, or cannot load at all, stops the server with the
    reason), then kept in step with the repository (lifecycle.py)."""
    from ovgenai_models.repository import repository_config

    from .engine.contract.kv_cache import memory_refusal
    from .models.registry import load_openvino_model
    from .models.specs import load_model_specs

    def stop_server(reason: str) -> None:
        app.state.fatal_error = reason
        signal.raise_signal(signal.SIGTERM)

    specs = list(load_model_specs(settings) if specs is None else specs)
    state: ServerState = app.state.server
    for spec in specs:
        refusal = memory_refusal(spec.path, spec.cache_size, spec.device)
        if refusal is not None:
            stop_server(f"{spec.name}: {refusal}")
            break
        model = load_openvino_model(spec, settings, stop_server)
        await model.runtime.start()
        state.models.add(model)
        logger.info("serving %s from %s on %s", spec.name, spec.path, spec.device)
    cores = next((spec.engine_cores for spec in specs if spec.device.startswith("CPU")), None)

    def resolve() -> list[ModelSpec]:  # placed as the server's first models were
        return [replace(spec, engine_cores=cores) if spec.device.startswith("CPU") else spec
                for spec in load_model_specs(settings)]

    lifecycle = Lifecycle(state, resolve, lambda spec, fatal: load_openvino_model(spec, settings, fatal),
                          repository_config(Path(settings.model).expanduser()),
                          settings.file_system_poll_wait_seconds, settings.idle_unload_s)
    lifecycle.started(specs)
    return lifecycle


def resolve(settings: BackendSettings) -> list[ModelSpec]:
    """Every model's engine options, its device checked; exits 2 with the reason when that cannot be done."""
    from ovgenai_models.repository import ModelRepositoryError

    from .models.devices import available_devices, check_device
    from .models.specs import load_model_specs

    try:
        specs = load_model_specs(settings)
        for spec in specs:
            check_device(spec.device, available_devices())
        return specs
    except (ModelRepositoryError, ValueError) as error:
        _exit(2, str(error))
    except OSError as error:  # e.g. a mounted repository the server's user may not read
        _exit(2, f"cannot read the model repository ({settings.model}): {error}")


def placed(specs: list[ModelSpec], serving_core: ServingCore) -> list[ModelSpec]:
    """The CPU engines given their cores, and this process moved to the serving core, when one is reserved."""
    from .engine.api_process.placement import cpu_quota, pin_this_process, plan, usable_cores

    cpu_specs = [spec for spec in specs if spec.device.startswith("CPU")]
    if not cpu_specs:
        return specs
    if serving_core == "auto" and any("INFERENCE_NUM_THREADS" in spec.plugin_config for spec in cpu_specs):
        serving_core = "shared"  # the threads are the user's choice (the Helm chart's: its CPU limit): leave them
    placement = plan(usable_cores(), serving_core, cpu_quota())
    logger.info("cores: %s", placement.describe())
    if placement.engine_cores is None or placement.serving_cores is None:
        return specs
    pin_this_process(placement.serving_cores)
    return [replace(spec, engine_cores=placement.engine_cores) if spec.device.startswith("CPU") else spec
            for spec in specs]


def serve(settings: BackendSettings, hooks: Sequence[LifespanHook] = (), routers: Sequence[APIRouter] = ()) -> None:
    """Fetch the source model if one is named, resolve, serve until stopped; exit 3 when a model could not be
    loaded at all."""
    from .models.source import SourceError, source_of, with_source_prepared

    if settings.pull and source_of(settings) is None:
        _exit(2, "--pull prepares a model to serve later: name it with --source_model (a Hub id, checkpoint or .gguf).")
    sock = None if settings.pull else bound(settings)  # a busy port is said before a model is fetched or loaded
    try:
        settings = with_source_prepared(settings)
    except SourceError as error:
        _exit(2, str(error))
    if settings.pull:
        return
    app = create_app(settings, specs=placed(resolve(settings), settings.serving_core), hooks=hooks, routers=routers)
    run_app(app, settings, sock)
    if app.state.fatal_error:
        _exit(3, f"could not load {app.state.fatal_error}")


def _exit(code: int, reason: str) -> NoReturn:
    sys.stderr.write(f"error: {reason}\n")
    raise SystemExit(code)
