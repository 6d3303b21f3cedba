"""The model process's calls, without a process: texts counted in slices, a lane's answers and errors, and the API
process's channel over real pipes with a thread answering in the model process's place (each answer to its own
call, a failure by its kind, and every call in flight failed, retryably, when the model process goes). The process
itself, killed and started again: system/test_model_process.py."""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import threading
from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from microservices.embedding import model_process
from microservices.embedding.model_process import (
    READY,
    ModelError,
    ModelProcess,
    ModelProcessStopped,
    _Channel,
    _run_lane,
    slices,
)


@pytest.mark.parametrize(("items", "limit", "expected"), [
    (["ab", "cd", "e"], 4, [["ab", "cd"], ["e"]]),
    (["abcdef", "a", "b"], 4, [["abcdef"], ["a", "b"]]),  # one larger than the limit goes alone
    (["a", "abcdef"], 4, [["a"], ["abcdef"]]),
    ([], 4, []),
])
def test_slices_keep_the_order_within_the_limit(items, limit, expected):
    assert slices(items, limit) == expected


def test_a_lane_answers_each_call_and_says_what_a_failed_one_raised():
    def fail(_texts):
        raise RuntimeError("Exception from src/inference")

    models = SimpleNamespace(count_tokens=lambda texts: [len(t) for t in texts], embed=fail)
    lane, answers = queue.SimpleQueue(), queue.SimpleQueue()
    threading.Thread(target=_run_lane, args=(models, lane, lambda *answer: answers.put(answer)), daemon=True).start()
    lane.put((1, "count_tokens", (["ab", "c"],)))
    lane.put((2, "embed", (["x"],)))
    assert answers.get(timeout=5) == (1, True, [2, 1])
    assert answers.get(timeout=5) == (2, False, ("RuntimeError", "Exception from src/inference"))


class StandIn:
    """The model process's end of the pipes, on a thread: answers "echo" with its argument and "fail" with an
    error; holds other calls until `finish()` (which also closes its answers, as the process's exit does)."""

    def __init__(self):
        self.calls_in, calls_out = multiprocessing.Pipe(duplex=False)
        answers_in, self.answers_out = multiprocessing.Pipe(duplex=False)
        self.channel_ends = (calls_out, answers_in)
        self.held: list = []
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.answers_out.send((READY, True, "facts"))
        while True:
            try:
                call_id, method, args = self.calls_in.recv()
            except EOFError:
                break
            if method == "echo":
                self.answers_out.send((call_id, True, args[0]))
            elif method == "fail":
                self.answers_out.send((call_id, False, ("ValueError", "bad")))
            else:
                self.held.append(call_id)
        self.done.set()

    def finish(self):
        self.answers_out.close()


async def test_the_channel_answers_each_call_and_fails_the_rest_when_the_model_process_goes():
    stand_in = StandIn()
    channel = _Channel(*stand_in.channel_ends, asyncio.get_running_loop())
    assert await asyncio.wrap_future(channel.ready) == "facts"
    first, failing, second = channel.call("echo", 1), channel.call("fail"), channel.call("echo", [2.0])
    assert await asyncio.wrap_future(second) == [2.0] and await asyncio.wrap_future(first) == 1
    with pytest.raises(ModelError, match="ValueError: bad") as failed:
        await asyncio.wrap_future(failing)
    assert failed.value.kind == "ValueError"
    held = channel.call("embed", ["a"])
    await asyncio.sleep(0.05)
    stand_in.finish()  # the model process has died with a call in it
    await asyncio.wait_for(channel.ended, 5)
    with pytest.raises(ModelProcessStopped, match="retry"):
        await asyncio.wrap_future(held)
    with pytest.raises(ModelProcessStopped):
        channel.call("echo", 3)


async def test_closing_the_channel_closes_the_model_process_s_calls():
    stand_in = StandIn()
    channel = _Channel(*stand_in.channel_ends, asyncio.get_running_loop())
    await asyncio.wrap_future(channel.ready)
    channel.close()
    assert await asyncio.to_thread(stand_in.done.wait, 5)  # it read to the end of its calls, and would exit


class Recording:
    """A channel that answers every call at once and records it."""

    def __init__(self):
        self.calls: list[tuple] = []

    def call(self, method, *args) -> Future:
        self.calls.append((method, *args))
        future: Future = Future()
        future.set_result([len(text) for text in args[0]] if method == "count_tokens" else ["t"] * len(args[0]))
        return future


async def test_texts_are_counted_in_slices_in_order(monkeypatch):
    monkeypatch.setattr(model_process, "SLICE_CHARACTERS", 5)
    model = ModelProcess(config=None)
    model._channel = Recording()
    assert await model.count_tokens(["abc", "de", "fghij", "k"]) == [3, 2, 5, 1]
    assert model._channel.calls == [("count_tokens", ["abc", "de"]), ("count_tokens", ["fghij"]),
                                    ("count_tokens", ["k"])]
    monkeypatch.setattr(model_process, "SLICE_TOKEN_IDS", 2)
    assert await model.decode([[1], [2], [3, 4]]) == ["t", "t", "t"]
    assert [call[1] for call in model._channel.calls[3:]] == [[[1], [2]], [[3, 4]]]


def test_no_calls_while_the_model_process_is_starting_again():
    model = ModelProcess(config=None)
    assert not model.alive
    with pytest.raises(ModelProcessStopped, match="starting again"):
        model.call("embed", ["a"])
