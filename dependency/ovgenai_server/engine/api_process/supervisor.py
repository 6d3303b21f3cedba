"""The engine process kept alive from the API process: started, watched, and started again when it dies (after a
backoff that grows while it keeps dying before it is ready); a model that never loads at all stops the server with
its reason instead of answering 503 forever. What the process says (ready, failed) reaches it from the runtime's
reader of its outputs (runtime.py), which it runs for each life of the process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
from collections.abc import Callable, Coroutine
from typing import Any

from ovgenai_common.logs import LogFormat

from ..contract.spec import ModelSpec
from ..contract.types import EngineHealth, EngineState
from ..engine_process import entry as engine_process

logger = logging.getLogger(__name__)

RESTART_BACKOFF_SECONDS = (0.5, 1, 2, 5, 10)
JOIN_SECONDS = 10  # an engine told to shut down is killed past this


class EngineSupervisor:
    def __init__(self, spec: ModelSpec, addresses: tuple[str, str], log_level: str, log_format: LogFormat,
                 serve: Callable[[], Coroutine[Any, Any, None]], stopped: Callable[[str], None]):
        """`addresses`: the commands' and the outputs' sockets the process connects to; `serve` reads its outputs
        until it fails (returning) or dies (cancelled); `stopped` is told why, each time it stops unasked."""
        self.spec, self.name = spec, spec.name
        self._addresses, self._log_level, self._log_format = addresses, log_level, log_format
        self._serve, self._stopped = serve, stopped
        self.state, self.message = EngineState.LOADING, "Loading model"
        self.fatal_error: str | None = None
        self.on_fatal: Callable[[str], None] | None = None  # when the model cannot be loaded at all
        self._process: multiprocessing.process.BaseProcess | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._ever_ready = False

    def health(self) -> EngineHealth:
        return EngineHealth(self.state, self.message)

    def ready(self) -> None:
        self.state, self.message = EngineState.AVAILABLE, ""
        self._ever_ready = True

    def failed(self, message: str) -> None:
        self.state, self.message = EngineState.FAILED, message

    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"engine-supervisor-{self.name}")

    async def close(self, shut_down: Callable[[], None]) -> None:
        """Stop for good: `shut_down` asks the process to end; past JOIN_SECONDS it is killed."""
        self._closing = True
        # A request that found the model before it was replaced or unloaded is told to retry (it finds the new one).
        self.failed("The model was unloaded or replaced; retry")
        if self._process is not None and self._process.is_alive():
            shut_down()
            await asyncio.get_running_loop().run_in_executor(None, self._process.join, JOIN_SECONDS)
            if self._process.is_alive():
                self._process.kill()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _supervise(self) -> None:
        failures = 0
        while not self._closing:
            self.state, self.message = EngineState.LOADING, "Loading model"
            process = self._spawn()
            await self._serve_until_it_ends(process)
            if self._closing:
                return
            if not self._ever_ready and self.state is EngineState.FAILED:
                # The model never loaded: retrying cannot help (bad model, device or options).
                self.fatal_error = self.message
                logger.critical("cannot load %s: %s", self.name, self.message)
                if self.on_fatal:
                    self.on_fatal(self.message)
                return
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
            failures = 0 if self.state is EngineState.AVAILABLE else failures + 1
            reason = self.message if self.state is EngineState.FAILED else f"exit code {process.exitcode}"
            logger.error("engine process for %s stopped (%s); restarting", self.name, reason)
            self.failed(f"Engine process stopped ({reason}); restarting")
            self._stopped(reason)
            await asyncio.sleep(RESTART_BACKOFF_SECONDS[min(failures, len(RESTART_BACKOFF_SECONDS) - 1)])

    def _spawn(self) -> multiprocessing.process.BaseProcess:
        commands, outputs = self._addresses
        process = multiprocessing.get_context("spawn").Process(
            target=engine_process.run_engine,
            args=(self.spec, commands, outputs, self._log_level, os.getpid(), self._log_format),
            name=f"ovgenai-engine-{self.name}",
            daemon=True,
        )
        process.start()
        self._process = process
        return process

    async def _serve_until_it_ends(self, process: multiprocessing.process.BaseProcess) -> None:
        """Its outputs served until it says it failed or it dies."""
        loop = asyncio.get_running_loop()
        reader = asyncio.create_task(self._serve())
        died = loop.create_future()
        loop.add_reader(process.sentinel, _settle, died)
        try:
            await asyncio.wait([reader, died], return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_reader(process.sentinel)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
