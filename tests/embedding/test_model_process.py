"""The model process's calls, without a process: token ids decoded in slices, a lane's answers and errors, messages
framed across a pipe whatever pieces it gives them in, and the API process's channel over real pipes with a thread
answering in the model process's place (each answer to its own call, a failure by its kind, and every call in
flight failed, retryably, when the model process goes). The process itself, killed and started again:
system/test_model_process.py."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import queue
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from ovgenai_services.embedding import model_process
from ovgenai_services.embedding.model_process import (
    LANES,
    READY,
    Frames,
    ModelError,
    ModelProcess,
    ModelProcessStopped,
    _Channel,
    _run_lane,
    frame,
    lane_of,
    read_frame,
    slices,
)
from tests.support.waiting import until


@pytest.mark.parametrize(("items", "limit", "expected"), [
    (["ab", "cd", "e"], 4, [["ab", "cd"], ["e"]]),
    (["abcdef", "a", "b"], 4, [["abcdef"], ["a", "b"]]),  # one larger than the limit goes alone
    (["a", "abcdef"], 4, [["a"], ["abcdef"]]),
    ([], 4, []),
])
def test_slices_keep_the_order_within_the_limit(items, limit, expected):
    assert slices(items, limit) == expected


def test_a_lane_answers_each_call_from_its_pipe_and_says_what_a_failed_one_raised():
    def fail(_texts):
        raise RuntimeError("Exception from src/inference")

    models = SimpleNamespace(decode=lambda token_ids: [str(ids) for ids in token_ids], embed=fail)
    calls_in, calls_out = multiprocessing.Pipe(duplex=False)
    answers: queue.SimpleQueue = queue.SimpleQueue()
    lane = threading.Thread(target=_run_lane, args=(models, calls_in, lambda *answer: answers.put(answer)),
                            daemon=True)
    lane.start()
    os.write(calls_out.fileno(), frame((1, "decode", ([[1, 2], [3]],))) + frame((2, "embed", (["x"],))))
    calls_out.close()  # the lane runs what it was sent, then ends
    lane.join(5)
    assert not lane.is_alive()
    assert answers.get(timeout=5) == (1, True, ["[1, 2]", "[3]"])
    assert answers.get(timeout=5) == (2, False, ("RuntimeError", "Exception from src/inference"))


@pytest.mark.parametrize(("method", "lane"), [("decode", "tokenizer"), ("embed", "model"), ("rerank", "model")])
def test_decoding_takes_the_tokenizers_lane_and_the_rest_the_models(method, lane):
    assert lane_of(method) == lane


def test_frames_are_read_back_whole_from_any_pieces():
    messages = [(1, True, [3, 4]), (2, False, ("ValueError", "bad")), (3, True, np.arange(40000, dtype=np.float32))]
    data = b"".join(frame(message) for message in messages)
    frames, read = Frames(), []
    for start in range(0, len(data), 7000):  # pieces that cut headers and payloads anywhere
        read += frames.feed(data[start:start + 7000])
    assert [m[:2] for m in read] == [m[:2] for m in messages] and read[1][2] == messages[1][2]
    assert read[0][2] == [3, 4] and np.array_equal(read[2][2], messages[2][2])
    assert frames.feed(b"") == []


def test_a_blocking_reader_reads_frames_until_the_pipe_ends():
    reading, writing = os.pipe()
    with open(writing, "wb") as writer:
        writer.write(frame("one") + frame([2]))
    with open(reading, "rb") as reader:
        assert (read_frame(reader), read_frame(reader)) == ("one", [2])
        with pytest.raises(EOFError):
            read_frame(reader)


class StandIn:
    """The model process's end of the pipes, on a thread per lane: answers "echo" with its argument and "fail" with
    an error; holds other calls until `finish()` (which also closes its answers, as the process's exit does).
    `lanes`: the lane each call was read from."""

    def __init__(self):
        calls = {lane: multiprocessing.Pipe(duplex=False) for lane in LANES}
        answers_in, self.answers_out = multiprocessing.Pipe(duplex=False)
        self.channel_ends = ({lane: ends[1] for lane, ends in calls.items()}, answers_in)
        self.held: list = []
        self.lanes: dict[int, str] = {}
        self.ended: set[str] = set()  # the lanes whose calls' pipe has closed
        self.done = threading.Event()  # every lane's
        self.lock = threading.Lock()
        self._answer(READY, True, "facts")
        for lane, (calls_in, _) in calls.items():
            threading.Thread(target=self._serve, args=(lane, calls_in), daemon=True).start()

    def _answer(self, *answer):
        with self.lock:
            os.write(self.answers_out.fileno(), frame(answer))

    def _serve(self, lane, calls_in):
        with open(calls_in.fileno(), "rb", closefd=False) as calls:
            while True:
                try:
                    call_id, method, args = read_frame(calls)
                except EOFError:
                    break
                self.lanes[call_id] = lane
                if method in ("echo", "decode"):
                    self._answer(call_id, True, args[0])
                elif method == "fail":
                    self._answer(call_id, False, ("ValueError", "bad"))
                else:
                    self.held.append(call_id)
        with self.lock:
            self.ended.add(lane)
            if self.ended == set(LANES):
                self.done.set()

    def finish(self):
        self.answers_out.close()


async def test_the_channel_answers_each_call_and_fails_the_rest_when_the_model_process_goes():
    stand_in = StandIn()
    channel = await _Channel.open(*stand_in.channel_ends)
    assert await channel.ready == "facts"
    first, failing, second = channel.call("echo", 1), channel.call("fail"), channel.call("echo", [2.0])
    decoded = channel.call("decode", ["text"])
    assert await second == [2.0] and await first == 1 and await decoded == ["text"]
    assert [stand_in.lanes[call_id] for call_id in sorted(stand_in.lanes)] == ["model", "model", "model",
                                                                                "tokenizer"]
    with pytest.raises(ModelError, match="ValueError: bad") as failed:
        await failing
    assert failed.value.kind == "ValueError"
    held = channel.call("embed", ["a"])
    await until(lambda: stand_in.held)  # the call has reached the model process
    stand_in.finish()  # the model process has died with a call in it
    await asyncio.wait_for(channel.ended, 5)
    with pytest.raises(ModelProcessStopped, match="retry"):
        await held
    with pytest.raises(ModelProcessStopped):
        channel.call("echo", 3)


async def test_a_call_whose_caller_gave_up_is_answered_to_nobody():
    stand_in = StandIn()
    channel = await _Channel.open(*stand_in.channel_ends)
    await channel.ready
    abandoned = channel.call("echo", 1)
    abandoned.cancel()
    assert await channel.call("echo", 2) == 2  # the answer to the first came first and was dropped
    channel.close()


async def test_a_large_call_and_its_answer_cross_whole():
    stand_in = StandIn()
    channel = await _Channel.open(*stand_in.channel_ends)
    await channel.ready
    texts = ["lighthouse keepers count ships " * 2000] * 64  # ~4 MB, far more than a pipe holds
    assert await asyncio.wait_for(channel.call("echo", texts), 30) == texts
    channel.close()


async def test_closing_the_channel_closes_the_model_process_s_calls():
    stand_in = StandIn()
    channel = await _Channel.open(*stand_in.channel_ends)
    await channel.ready
    channel.close()
    assert await asyncio.to_thread(stand_in.done.wait, 5)  # each lane read to the end of its calls: it would exit


class Recording:
    """A channel that answers every call at once and records it."""

    def __init__(self):
        self.calls: list[tuple] = []

    def call(self, method, *args) -> asyncio.Future:
        self.calls.append((method, *args))
        future = asyncio.get_running_loop().create_future()
        future.set_result(["t"] * len(args[0]))
        return future


async def test_token_ids_are_decoded_in_slices_in_order(monkeypatch):
    monkeypatch.setattr(model_process, "SLICE_TOKEN_IDS", 2)
    model = ModelProcess(config=None)
    model._channel = Recording()
    assert await model.decode([[1], [2], [3, 4]]) == ["t", "t", "t"]
    assert model._channel.calls == [("decode", [[1], [2]]), ("decode", [[3, 4]])]


async def test_the_batchers_call_is_written_at_once_with_no_task_between():
    model = ModelProcess(config=None)
    model._channel = Recording()
    pending = model.embed(["a query", "b"], [None, 8], [4, None])
    assert model._channel.calls == [("embed", ["a query", "b"], [None, 8], [4, None])]  # before any turn of the loop
    assert asyncio.isfuture(pending)


def test_no_calls_while_the_model_process_is_starting_again():
    model = ModelProcess(config=None)
    assert not model.alive
    with pytest.raises(ModelProcessStopped, match="starting again"):
        model.call("embed", ["a"])
