"""`python -m ovgenai_server.torchserve`: the backend behind TorchServe's LLM-API interface.

Inference (8080: /predictions/{model}, /ping, and the backend's own OpenAI routes), management (8081), metrics
(8082) and gRPC inference (7070), all in one process around one engine per model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator

import uvicorn
from fastapi import FastAPI
from pydantic_settings import CliApp, SettingsError

from ovgenai_common.logs import setup_logging
from ovgenai_common.security import exposure_warning

from .settings import TorchServeSettings, address

logger = logging.getLogger(__name__)


class _SideServer(uvicorn.Server):
    """The management and metrics ports: the inference server owns the signals and shuts these down itself."""

    @contextlib.contextmanager
    def capture_signals(self):
        yield


def side_servers(settings: TorchServeSettings):
    """TorchServe's management and metrics ports and its gRPC port, for the backend's lifespan (app.py's hooks):
    started once the engines are, stopped before they drain."""

    @contextlib.asynccontextmanager
    async def hook(app: FastAPI) -> AsyncIterator[None]:
        from .grpc_server import start_grpc
        from .http import management_app, metrics_app

        state = app.state.server
        app.state.torchserve = settings  # what the inference routes read (http.py)
        log_level = settings.backend().log_level.lower()
        sides = []
        for side_app, url in ((management_app(state, settings), settings.management_address),
                              (metrics_app(app.state.registry, settings), settings.metrics_address)):
            host, port = address(url)
            if warning := exposure_warning(host, settings.api_key):
                logger.warning("%s: %s", side_app.title, warning)
            server = _SideServer(uvicorn.Config(side_app, host=host, port=port, lifespan="off", log_level=log_level,
                                                access_log=False, log_config=None))
            sides.append((server, asyncio.create_task(server.serve())))
        grpc_server, grpc_port = await start_grpc(state, settings)
        app.state.grpc_port = grpc_port
        try:
            yield
        finally:
            # HTTP has drained by now (within graceful_shutdown_seconds) while gRPC streams ran on; what is still
            # streaming is cut here, so the whole shutdown keeps that one bound.
            await grpc_server.stop(0)
            for server, _ in sides:
                server.should_exit = True
            await asyncio.gather(*(task for _, task in sides), return_exceptions=True)

    return hook


def from_checkpoint(settings: TorchServeSettings) -> TorchServeSettings:
    """MODEL_PATH naming a Transformers checkpoint, as TorchServe loads it: served as its OpenVINO IR export, under
    MODEL_NAME or the checkpoint folder's name, its weights already as QUANTIZATION asks."""
    from pathlib import Path

    from .checkpoint import exported, is_checkpoint, weight_format

    path = Path(settings.model).expanduser()
    if not is_checkpoint(path):
        return settings
    folder = exported(path, settings.cache_dir, weight_format(settings.dtype, settings.quantization))
    name = settings.model_name or settings.served_model_name or path.resolve().name
    return settings.model_copy(update={"model": str(folder), "model_name": name, "quantization": "none"})


def main(argv: list[str] | None = None) -> None:
    from ovgenai_models.errors import ExportError

    try:
        settings = CliApp.run(TorchServeSettings, cli_args=sys.argv[1:] if argv is None else argv)
    except SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    setup_logging(settings.log_level, settings.log_format)
    try:
        settings = from_checkpoint(settings)
    except ExportError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    from ..app import serve
    from .http import router

    serve(settings.backend(), hooks=[side_servers(settings)], routers=[router])


if __name__ == "__main__":
    main()
