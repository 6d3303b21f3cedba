"""The engine loop: commands in, one pipeline step, every request's new tokens out, until Shutdown or the parent is
gone."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import msgspec
import zmq

from ovgenai_common.errors import library_reason

from ..contract.messages import (
    Abort,
    AddGroup,
    AddRequest,
    CheckGrammar,
    FromEngine,
    GrammarVerdict,
    RequestStep,
    SeqOutput,
    Shutdown,
    StepOutputs,
    ToEngine,
)
from ..contract.types import RequestTimings, TextPrompt, engine_ends_at_stops
from .generation_config import build_generation_config
from .grammar_worker import GrammarWorker
from .prefix_gate import PrefixGate

_FINISH = {"STOP": "stop", "LENGTH": "length", "TOOL_CALL": "tool_calls"}
PARENT_CHECK_MS = 1000
GRAMMAR_POLL_MS = 10  # how soon a request held for its grammar goes in once the grammar is compiled, when idle


class EngineLoop:
    """Commands in, one pipeline step, every request's new tokens out, until Shutdown or the parent is gone.

    Each turn: wait for work when idle (`_wait_for_work`), take every pending command (`_apply`), step the pipeline
    once, read each request's new tokens or its end (`_collect`), and send one StepOutputs for all of them
    (`_report`). A request is held back by the prefix gate while another one computes the same prompt prefix.
    """

    def __init__(self, pipeline: Any, eos: list[int], commands: zmq.Socket, send: Callable[[FromEngine], None],
                 decoder: msgspec.msgpack.Decoder, parent: int, gate: PrefixGate | None,
                 grammars: GrammarWorker | None = None):
        import openvino_genai

        self.pipeline, self.eos, self.commands, self.send = pipeline, eos, commands, send
        self.decoder, self.parent, self.gate, self.grammars = decoder, parent, gate, grammars
        status = openvino_genai.GenerationStatus
        self.running, self.ignored, self.cancel = status.RUNNING, status.IGNORED, status.CANCEL
        self.cancelled = {status.CANCEL, status.STOP}
        self.handles: dict[int, Any] = {}  # openvino_genai GenerationHandle by request id
        self.beams: dict[int, int] = {}  # beam-search requests: how many of the best beams to return
        self.echoes: dict[int, _Echo] = {}  # echo requests: the prompt that comes back ahead of the new tokens
        self.times: dict[int, _Times] = {}  # each request's arrival, admission and first token, for its timings
        # Requests whose prompt is text with images: their prompt length is the engine's to say.
        self.text_prompts: set[int] = set()
        # Requests with a grammar not yet sampled: the grammar must stay compiled until they are (grammars.py).
        self.unsampled: set[int] = set()

    def run(self) -> None:
        while True:
            if not self.handles and not self.pipeline.has_non_finished_requests() and not self._wait_for_work():
                return
            pending = self._pending()
            steps: list[RequestStep] = []
            if not self._apply(pending, steps):
                return
            self._release_compiled(steps)
            # Cancelled requests leave the pipeline (and free their KV blocks) at the next step, so step even
            # when every handle is gone.
            stepped = self.pipeline.has_non_finished_requests()
            if stepped:
                self.pipeline.step()
            self._collect(steps)
            if stepped and not self.pipeline.has_non_finished_requests():
                # The pipeline releases finished and cancelled requests' KV blocks at its next step, and its
                # metrics describe the last step: without one more (empty) step, an engine going idle would keep
                # reporting the cache as used.
                self.pipeline.step()
            if steps or pending or stepped:
                self._report(steps)
            if self.grammars is not None:
                self.grammars.evict_if_due(len(self.unsampled))

    def _wait_for_work(self) -> bool:
        """Block until a command arrives, waking up now and then to notice a parent that died without telling us;
        False when it has. While a grammar compiles, the wait is short: the requests held for it go in when done."""
        if self.grammars is not None and self.grammars.busy:
            self.commands.poll(GRAMMAR_POLL_MS)
            return os.getppid() == self.parent
        while not self.commands.poll(PARENT_CHECK_MS):
            if os.getppid() != self.parent:
                return False
        return True

    def _pending(self) -> list[ToEngine]:
        """Every command that has arrived, without blocking."""
        pending = []
        while self.commands.poll(0):
            pending.append(self.decoder.decode(self.commands.recv(copy=False).buffer))
        return pending

    def _apply(self, pending: list[ToEngine], steps: list[RequestStep]) -> bool:
        """Every pending command applied; False on Shutdown (the loop ends)."""
        for command in pending:
            if isinstance(command, AddRequest | AddGroup):
                for add in command.requests if isinstance(command, AddGroup) else [command]:
                    self.times[add.request_id] = _Times(add.arrival or time.monotonic())
                    if self.gate is None or self.gate.admit(add):
                        self._add(add, steps)
            elif isinstance(command, CheckGrammar):
                if self.grammars is None:
                    self.send(GrammarVerdict(command.check_id, None))
                else:
                    self.grammars.check(command)
            elif isinstance(command, Abort):
                self._abort(command.request_id, steps)
            elif isinstance(command, Shutdown):
                for handle in self.handles.values():
                    handle.cancel()
                if self.pipeline.has_non_finished_requests():
                    self.pipeline.step()  # lets the pipeline release the cancelled requests' KV blocks
                return False
        return True

    def _release_compiled(self, steps: list[RequestStep]) -> None:
        """The requests held for their grammar whose compile ended: into the pipeline, or failed with the reason."""
        if self.grammars is None:
            return
        for command, refusal in self.grammars.ready():
            if refusal is None:
                self._add(command, steps)
            else:
                steps.append(RequestStep(command.request_id, [], True, refusal))
                self.times.pop(command.request_id, None)
                self._prompt_done(command.request_id, False, steps)

    def _add(self, command: AddRequest, steps: list[RequestStep]) -> None:
        if self.grammars is not None and not self.grammars.admits(command):
            return  # held until its grammar is compiled: a step never compiles one
        try:
            config = build_generation_config(command.params, self.eos,
                                             engine_stops=engine_ends_at_stops(command.params, command.prompt))
            self.handles[command.request_id] = self._add_to_pipeline(command, config)
            if command.params.structured_output is not None:
                self.unsampled.add(command.request_id)
            times = self.times.get(command.request_id)
            if times is not None:
                times.admitted = time.monotonic()
            if command.params.num_beams > 1:
                self.beams[command.request_id] = command.params.n
            if command.params.echo:
                self.echoes[command.request_id] = _Echo(len(command.prompt.token_ids))
        except Exception as error:
            steps.append(RequestStep(command.request_id, [], True, library_reason(error)))
            self.times.pop(command.request_id, None)
            self._prompt_done(command.request_id, False, steps)  # a leader that never ran hands over

    def _add_to_pipeline(self, command: AddRequest, config: Any) -> Any:
        import numpy as np
        import openvino

        prompt = command.prompt
        if isinstance(prompt, TextPrompt):  # a vision-language model: the prompt's text and its images
            images = [openvino.Tensor(np.frombuffer(image.data, np.uint8).reshape(1, image.height, image.width, 3))
                      for image in prompt.images]
            handle = self.pipeline.add_request(command.request_id, prompt.text, images, config)
            self.text_prompts.add(command.request_id)
            return handle
        ids = openvino.Tensor(np.asarray([prompt.token_ids], dtype=np.int64))
        return self.pipeline.add_request(command.request_id, ids, config)

    def _abort(self, request_id: int, steps: list[RequestStep]) -> None:
        self.times.pop(request_id, None)
        if self.gate is not None and self.gate.drop(request_id):
            return  # still held: never reached the pipeline
        if self.grammars is not None and self.grammars.drop(request_id):
            self._prompt_done(request_id, False, steps)  # a leader held for its grammar hands over
            return
        self.unsampled.discard(request_id)
        self.beams.pop(request_id, None)
        self.echoes.pop(request_id, None)
        self.text_prompts.discard(request_id)
        handle = self.handles.pop(request_id, None)
        if handle is not None:
            handle.cancel()
        self._prompt_done(request_id, False, steps)

    def _prompt_done(self, request_id: int, computed: bool, steps: list[RequestStep]) -> None:
        """A prompt computed (or abandoned): the requests the gate held behind it go in."""
        if self.gate is not None and self.gate.is_leader(request_id):
            for released in self.gate.prompt_done(request_id, computed):
                self._add(released, steps)

    def _collect(self, steps: list[RequestStep]) -> None:
        now = time.monotonic()  # one clock read per step: every request's output of this step came out now
        for request_id, handle in list(self.handles.items()):
            status = handle.get_status()
            if request_id in self.beams:
                if status == self.running:
                    continue  # beams are re-ranked until the end: only the n best are reported, once finished
                seqs = _best_beams(handle, self.beams.pop(request_id))
            else:
                seqs = _new_tokens(handle, self.echoes.get(request_id)) if handle.can_read() else []
            times = self.times.get(request_id)
            first = None  # the request's first output: its times so far
            if seqs and times is not None and times.first is None:
                times.first = now
                first = times.timings(now)
            if seqs or status != self.running:
                self.unsampled.discard(request_id)
            if status == self.running:
                if seqs:
                    # A first output says the request's queue and prefill times: the API process may end it at a
                    # stop string, and aborts it then (engine/api_process/runtime.py).
                    steps.append(RequestStep(request_id, seqs, False, timings=first))
                    self._prompt_done(request_id, True, steps)  # a first token: its prompt is computed (and cached)
                continue
            del self.handles[request_id]
            self.echoes.pop(request_id, None)
            self.times.pop(request_id, None)
            counted = request_id in self.text_prompts
            self.text_prompts.discard(request_id)
            self._prompt_done(request_id, status not in (self.ignored, self.cancel), steps)
            if status == self.ignored:
                message = "The request does not fit into the KV cache; raise cache_size or shorten the prompt."
                steps.append(RequestStep(request_id, seqs, True, message))
            elif status not in self.cancelled:
                steps.append(RequestStep(request_id, seqs, True, timings=times.timings(now) if times else None,
                                         prompt_tokens=_input_tokens(handle) if counted else None))

    def _report(self, steps: list[RequestStep]) -> None:
        metrics = self.pipeline.get_metrics()
        running = min(metrics.scheduled_requests, len(self.handles))
        held = self.gate.held if self.gate is not None else 0
        self.send(StepOutputs(steps, running=running, waiting=len(self.handles) - running + held,
                              kv_cache_usage=metrics.cache_usage / 100.0,
                              prefix_waits=self.gate.waits if self.gate is not None else 0))


def _input_tokens(handle: Any) -> int | None:
    """The prompt tokens a finished request had the engine compute: for a vision-language model, the text's and each
    image's (as many as the model's vision encoder made of it). None where the library does not say."""
    try:
        return int(handle.get_perf_metrics().get_num_input_tokens()) or None
    except Exception:  # noqa: BLE001 - the count is a refinement of usage; never fail a finished request over it
        return None


class _Times:
    """When a request reached the engine, entered the pipeline and gave its first token (time.monotonic())."""

    __slots__ = ("arrival", "admitted", "first")

    def __init__(self, arrival: float):
        self.arrival = arrival
        self.admitted: float | None = None
        self.first: float | None = None

    def timings(self, finished: float) -> RequestTimings:
        admitted = self.admitted if self.admitted is not None else finished
        first = self.first if self.first is not None else finished
        return RequestTimings(max(0.0, admitted - self.arrival), max(0.0, first - admitted), max(0.0, finished - first))


class _Echo:
    """The prompt openvino_genai sends back ahead of an echo request's new tokens (in one piece, or one piece per
    scheduled chunk when no token is to be generated), told apart from them per sequence."""

    def __init__(self, prompt_tokens: int):
        self.prompt_tokens = prompt_tokens
        self.seen: dict[int, int] = {}

    def split(self, seq_id: int, ids: list[int], logprobs: list[float]) -> tuple[list[float | None], int]:
        """The prompt's log probabilities at the head of this output, and how many ids they cover."""
        seen = self.seen.get(seq_id, 0)
        count = min(self.prompt_tokens - seen, len(ids))
        self.seen[seq_id] = seen + count
        head: list[float | None] = list(logprobs[:count])
        if seen == 0 and head:
            head[0] = None  # the engine puts a placeholder there: the first token has no context to be scored in
        return head, count


def _new_tokens(handle: Any, echo: _Echo | None = None) -> list[SeqOutput]:
    """Each sequence's tokens generated since the last read, with their log probabilities when asked for."""
    seqs = []
    for seq_id, output in handle.read().items():
        ids, logprobs = list(output.generated_ids), list(output.generated_log_probs)
        prompt_logprobs = None
        if echo is not None:
            prompt_logprobs, count = echo.split(seq_id, ids, logprobs)
            ids, logprobs = ids[count:], logprobs[count:]
        seqs.append(SeqOutput(seq_id, ids, _FINISH.get(output.finish_reason.name), logprobs or None, prompt_logprobs))
    return seqs


def _best_beams(handle: Any, n: int) -> list[SeqOutput]:
    best = sorted(handle.read_all(), key=lambda o: o.score, reverse=True)[:n]
    return [SeqOutput(i, list(o.generated_ids), _FINISH.get(o.finish_reason.name) or "stop", None)
            for i, o in enumerate(best)]
