"""Models loaded, reloaded and unloaded while the server runs, as OVMS does from its config.json: the repository is
checked every `file_system_poll_wait_seconds` (or at once by POST /v1/config/reload), and each change applied in the
background while every other model serves.

- A new model loads apart (`LOADING`, then served once its engine is ready); one that cannot load is `FAILED` with
  the reason, and nothing else changes.
- A changed model's new engine starts beside the old one, which serves until the new one is ready, then finishes
  the requests it holds and closes; if the new one fails, the old one keeps serving.
- A removed model takes no new request, finishes those it holds, and closes.
- With `idle_unload_s`, a model without requests for that long is unloaded (`UNLOADED`); the next request naming it
  loads it again and waits for it.
- Before a model loads, its weights and KV cache are checked against the memory left (engine/contract/kv_cache.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ovgenai_common.errors import APIError, ErrorKind, library_reason

from .engine.contract.kv_cache import memory_refusal
from .engine.contract.spec import ModelSpec
from .engine.contract.types import EngineState
from .models.registry import ModelStatus, ServedModel
from .state import ServerState

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.1  # while an engine starts, and while a retiring model's requests end
READY_TIMEOUT = 900.0  # an engine's start, its autotune sweep included
DRAIN_TIMEOUT = 600.0  # a retiring model's requests; past it they are failed with a retryable error
# Loads a model (its tokenizer and template here, its engine not started); told why when it cannot load at all.
Loader = Callable[[ModelSpec, Callable[[str], None]], ServedModel]


def fingerprint(config: Path | None) -> tuple[tuple[str, int, int], ...]:
    """What a repository's change shows in: its config.json and every graph.pbtxt beside it (path, time, size)."""
    if config is None:
        return ()
    files = [config, *sorted(config.parent.glob("*/graph.pbtxt")), *sorted(config.parent.glob("*/*/graph.pbtxt"))]
    stats = []
    for path in files:
        with contextlib.suppress(OSError):
            stat = path.stat()
            stats.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(stats)


class Lifecycle:
    def __init__(self, state: ServerState, resolve: Callable[[], list[ModelSpec]], load: Loader,
                 config: Path | None = None, poll_seconds: float = 0.0, idle_unload_s: float = 0.0):
        self.state, self.registry = state, state.models
        self._resolve, self._load_model = resolve, load
        self.config, self.poll_seconds, self.idle_unload_s = config, poll_seconds, idle_unload_s
        self.specs: dict[str, ModelSpec] = {}  # what each model known to the server was (or is being) loaded from
        self.reload_failures: dict[str, str] = {}  # a served model whose new version failed: why
        self._loading: dict[str, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()
        self._lock = asyncio.Lock()
        self._last_used: dict[str, float] = {}
        self._retiring: set[ServedModel] = set()
        self.registry.wake = self.wake

    def started(self, specs: list[ModelSpec]) -> None:
        """The models the server started with (loaded by its start path), and the watch and idle checks begun."""
        self.specs = {spec.name: spec for spec in specs}
        self._seen = fingerprint(self.config)
        if self.config is not None and self.poll_seconds > 0:
            self._spawn(self._watch())
        if self.idle_unload_s > 0:
            self._spawn(self._unload_idle())

    async def close(self) -> None:
        for task in [*self._tasks, *self._loading.values()]:
            task.cancel()
        for task in [*self._tasks, *self._loading.values()]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await asyncio.gather(*(model.runtime.close() for model in self._retiring), return_exceptions=True)

    async def reload(self) -> list[str]:
        """The repository read again and its changes begun (they complete in the background); the names changed. A
        repository that cannot be read changes nothing: a 400 with the reason."""
        async with self._lock:
            try:
                specs = await asyncio.to_thread(self._resolve)
            except (ValueError, OSError) as error:  # ModelRepositoryError is a ValueError
                raise APIError(ErrorKind.INVALID_REQUEST, f"The model repository cannot be read: {error}") from error
            self._seen = fingerprint(self.config)
            return self._apply({spec.name: spec for spec in specs})

    async def settled(self) -> None:
        """Until the loads under way (a reload's, or the watch's) have ended, whatever their outcome."""
        while self._loading:
            await asyncio.gather(*(asyncio.shield(load) for load in list(self._loading.values())),
                                 return_exceptions=True)

    async def wake(self, name: str) -> None:
        """An idle-unloaded model loaded again for a request, which waits for it (a 503 if it cannot load)."""
        if name not in self._loading and name in self.specs:
            self._begin_load(self.specs[name])
        if name not in self._loading:
            return
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self._loading[name])
        if self.registry.get(name) is None:
            status = self.registry.statuses.get(name)
            raise APIError(ErrorKind.UNAVAILABLE, f"The model '{name}' could not be loaded again: "
                           f"{status.message if status else 'unloaded'}.", "model")

    def _apply(self, wanted: dict[str, ModelSpec]) -> list[str]:
        changed = []
        for name in [name for name in self.specs if name not in wanted]:
            del self.specs[name]
            self._spawn(self._remove(name))
            changed.append(name)
        for name, spec in wanted.items():
            if self.specs.get(name) != spec:
                self.specs[name] = spec
                self._begin_load(spec)
                changed.append(name)
        if changed:
            logger.info("model repository changed: %s", ", ".join(sorted(changed)))
        return changed

    def _begin_load(self, spec: ModelSpec) -> None:
        earlier = self._loading.pop(spec.name, None)
        if earlier is not None:  # superseded by a newer change
            earlier.cancel()
        task = asyncio.create_task(self._load(spec), name=f"load-{spec.name}")
        self._loading[spec.name] = task
        task.add_done_callback(lambda done: self._loading.pop(spec.name, None) if self._loading.get(
            spec.name) is done else None)

    async def _load(self, spec: ModelSpec) -> None:
        name = spec.name
        if self.registry.get(name) is None:
            self.registry.statuses[name] = ModelStatus("LOADING", "Loading model")
        refusal = await asyncio.to_thread(memory_refusal, spec.path, spec.cache_size, spec.device)
        if refusal is not None:
            self._failed(name, f"not loaded: {refusal}")
            return
        fatal: list[str] = []
        try:
            model = await asyncio.to_thread(self._load_model, spec, fatal.append)
        except Exception as error:  # a tokenizer or template that cannot be read: the model fails, the rest serve
            self._failed(name, f"cannot load: {library_reason(error)}")
            return
        await model.runtime.start()
        try:
            ready = await self._ready(model, fatal)
        except asyncio.CancelledError:
            await model.runtime.close()
            raise
        if not ready:
            await model.runtime.close()
            self._failed(name, fatal[0] if fatal else f"not ready within {READY_TIMEOUT:g} s")
            return
        old = self.registry.get(name)
        self.registry.add(model)
        self.reload_failures.pop(name, None)
        self._last_used[name] = time.monotonic()
        logger.info("serving %s from %s on %s", name, spec.path, spec.device)
        if old is not None:
            self._spawn(self._retire(old))

    async def _ready(self, model: ServedModel, fatal: list[str]) -> bool:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline and not fatal:
            if model.runtime.health().state is EngineState.AVAILABLE:
                return True
            await asyncio.sleep(POLL_SECONDS)
        return False

    def _failed(self, name: str, reason: str) -> None:
        logger.error("model %s %s", name, reason)
        if self.registry.get(name) is not None:  # its earlier version keeps serving
            self.reload_failures[name] = reason
        else:
            self.registry.statuses[name] = ModelStatus("FAILED", reason)

    async def _remove(self, name: str) -> None:
        loading = self._loading.pop(name, None)
        if loading is not None:
            loading.cancel()
        self.registry.statuses.pop(name, None)
        self.reload_failures.pop(name, None)
        model = self.registry.remove(name)
        if model is not None:
            logger.info("unloading %s", name)
            await self._retire(model)

    async def _retire(self, model: ServedModel) -> None:
        """A model no longer named by requests: its engine closed once the requests it holds have ended."""
        self._retiring.add(model)
        share = self.state.shares.get(model.runtime)
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while (model.runtime.in_flight() or (share is not None and share.held)) and time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
        self._retiring.discard(model)
        await model.runtime.close()
        self.state.shares.pop(model.runtime, None)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.poll_seconds)
            if fingerprint(self.config) != self._seen:
                try:
                    await self.reload()
                except APIError as error:  # a file caught half-written, or a mistake: said, and read again later
                    logger.error("%s", error.message)

    async def _unload_idle(self) -> None:
        while True:
            await asyncio.sleep(min(self.idle_unload_s, 1.0))
            now = time.monotonic()
            for model in list(self.registry):
                share = self.state.shares.get(model.runtime)
                if model.runtime.in_flight() or (share is not None and share.held):
                    self._last_used[model.name] = now
                elif now - self._last_used.setdefault(model.name, now) >= self.idle_unload_s:
                    self.registry.remove(model.name)
                    self.registry.statuses[model.name] = ModelStatus("UNLOADED", "Unloaded while idle; the next "
                                                                                 "request loads it again")
                    logger.info("unloading %s: idle for %g s", model.name, self.idle_unload_s)
                    self._spawn(self._retire(model))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
