"""Pinning moves every thread of a process; `--serving_core reserved` on the real server: the engine process computes on
every core but the last, and every thread of the API process (HTTP, tokenizer, streams) runs on the last one."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import httpx
import pytest

from ovgenai_server.engine.api_process.placement import pin_this_process
from tests.support.servers import MODELS, RemoteServer

CORES = tuple(sorted(os.sched_getaffinity(0)))
pytestmark = pytest.mark.skipif(len(CORES) < 2, reason="a serving core needs two usable cores")


def thread_cores(pid: int) -> set[tuple[int, ...]]:
    """The affinity of each thread of a process."""
    return {tuple(sorted(os.sched_getaffinity(int(task.name)))) for task in Path(f"/proc/{pid}/task").iterdir()}


def engine_pid(server_pid: int) -> int:
    children = Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split()
    engines = [int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(engines) == 1, children
    return engines[0]


def test_the_engine_and_the_serving_side_get_their_own_cores(default_model):
    with RemoteServer("ovgenai_server", ["--model", str(MODELS), "--serving_core", "reserved"]) as server:
        reply = httpx.post(f"{server.url}/v1/completions", timeout=120, json={
            "model": default_model, "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0})
        assert reply.status_code == 200 and reply.json()["choices"][0]["text"], reply.text
        assert thread_cores(server.process.pid) == {CORES[-1:]}
        engine = engine_pid(server.process.pid)
        # OpenVINO may pin each of its inference threads to one of the engine's cores.
        assert all(set(cores) <= set(CORES[:-1]) for cores in thread_cores(engine))
        assert '"engine_cores": [' in server.logs() and "serving on" in server.logs()


def test_pinning_moves_every_thread_of_the_process():
    """Run in a child process: pinning is for the whole process, and the test runner must keep its cores."""
    cores = tuple(sorted(os.sched_getaffinity(0)))
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        ready, stop = threading.Event(), threading.Event()
        worker = threading.Thread(target=lambda: (ready.set(), stop.wait()))
        worker.start()
        ready.wait()
        pin_this_process(cores[-1:])
        masks = {tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir("/proc/self/task")}
        stop.set()
        os.write(write, repr(masks).encode())
        os._exit(0)
    os.close(write)
    masks = os.read(read, 1000).decode()
    os.waitpid(child, 0)
    assert masks == repr({cores[-1:]})
