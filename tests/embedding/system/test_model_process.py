"""The model's work in a process of its own (model_process.py), seen from outside: the service's event loop keeps
answering while the largest bodies it takes are tokenized and embedded, and the answers are the pipeline's own."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import signal
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from ovgenai_common.settings import MAX_JSON_BYTES
from tests.support.servers import MODELS, RemoteServer, child_pids, wait_until

MODEL = MODELS / "sentence-transformers/all-MiniLM-L6-v2"
PASSAGE = "lighthouse keepers count ships " * 2000  # 62,000 characters, ~8,000 tokens, truncated to 256
BODY = json.dumps({"inputs": [PASSAGE] * 64}).encode()  # just under the JSON body limit


def in_process_vector(text: str, hint: str) -> np.ndarray:
    from ovgenai_services.embedding.model import ModelConfig, load_embedder, read_model_info

    config = ModelConfig(MODEL, "CPU", read_model_info(MODEL, None), 256, {})
    return load_embedder(config, {"INFERENCE_PRECISION_HINT": hint}).embed([text])[0]


def openvino_libraries(pid: int) -> set[str]:
    """The OpenVINO libraries (tokenizers and plugins among them) a process has loaded."""
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.rsplit("/", 1)[-1] for line in maps if "/libopenvino" in line}


def test_live_answers_while_four_bodies_at_the_limit_are_tokenized_and_embedded(embedding_service):
    """The event loop used to stop for 0.27-0.43 s while four such bodies were tokenized (2-core AMX Xeon): the
    tokenizer binding, called from several threads at once, held the API process's GIL. Their tokens and vectors are
    the model process's work; the API process only checks and parses the bodies. /live answers throughout; its worst
    latency is printed (`pytest -s`), not asserted: it depends on the machine."""
    assert len(BODY) < MAX_JSON_BYTES

    def send() -> httpx.Response:
        return httpx.post(embedding_service.url + "/embed", content=BODY, timeout=600,
                          headers={"content-type": "application/json"})

    latencies: list[float] = []
    with concurrent.futures.ThreadPoolExecutor(4) as pool, httpx.Client(timeout=30) as client:
        answers = [pool.submit(send) for _ in range(4)]
        while not all(answer.done() for answer in answers):
            started = time.perf_counter()
            assert client.get(embedding_service.url + "/live").status_code == 200
            latencies.append(time.perf_counter() - started)
            time.sleep(0.005)  # a probe's pace, not a wait
    worst, median = max(latencies) * 1000, np.median(latencies) * 1000
    print(f"/live worst {worst:.1f} ms, median {median:.2f} ms")  # noqa: T201 - the figure the docstring names
    responses = [answer.result() for answer in answers]
    assert all(response.status_code == 200 for response in responses), responses[0].text
    assert len(latencies) > 10, latencies  # probed while the bodies were being processed
    # The API process cannot tokenize or embed: no OpenVINO library is loaded in it, and the model process has them.
    assert openvino_libraries(embedding_service.process.pid) == set()
    assert {"libopenvino_tokenizers.so", "libopenvino_intel_cpu_plugin.so"} <= openvino_libraries(
        model_process(embedding_service))

    # Every vector is the passage's, as the pipeline computes it in the precision the service says it uses.
    vectors = np.array([vector for response in responses for vector in response.json()])
    assert vectors.shape == (4 * 64, 384)
    assert all(response.headers["x-inputs-truncated"] == "64" for response in responses)
    [line] = [line for line in embedding_service.logs().splitlines() if "embedding: CPU computes in" in line]
    reference = in_process_vector(PASSAGE, line.rsplit(" ", 1)[1].strip())
    np.testing.assert_allclose(vectors, np.broadcast_to(reference, vectors.shape), atol=1e-5)


def model_process(server: RemoteServer) -> int:
    """The pid of the server's model process (its other child is multiprocessing's resource tracker)."""
    [pid] = [pid for pid in child_pids(server.process.pid)
             if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    return pid


def test_a_model_process_that_dies_fails_its_requests_with_503_and_is_started_again():
    with RemoteServer("ovgenai_services.embedding", env={"EMBEDDING_MODEL_PATH": str(MODEL)}) as server:
        first = model_process(server)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            # 64 long passages: 8 batches of 8, so some are in the model process when it is killed
            pending = pool.submit(httpx.post, server.url + "/embed", content=BODY, timeout=60,
                                  headers={"content-type": "application/json"})
            wait_until(lambda: b"embedding_queued_texts 0.0" not in httpx.get(server.url + "/metrics").content,
                       30, interval=0.005, message="the passages queued")
            os.kill(first, signal.SIGKILL)
            answer = pending.result()
        # The request in flight is answered (not left hanging), 503 and retryable, as is one sent while it restarts.
        assert answer.status_code == 503 and "retry" in answer.json()["error"]["message"], answer.text
        wait_until(lambda: httpx.get(server.url + "/health").status_code == 503, 10, message="/health 503")
        assert httpx.post(server.url + "/v1/embeddings", json={"input": "hello"}).status_code == 503
        wait_until(server.healthy, 120, message="the model process started again")
        again = httpx.post(server.url + "/v1/embeddings", json={"input": "hello"}, timeout=30)
        assert again.status_code == 200 and len(again.json()["data"][0]["embedding"]) == 384
        assert model_process(server) != first
        assert "the embedding model process stopped (exit code -9); starting it again" in server.logs()


async def test_a_model_process_that_dies_while_loading_stops_the_start_with_its_exit_code():
    from ovgenai_services.embedding.model_process import ModelProcess
    from ovgenai_services.embedding.service import model_config
    from ovgenai_services.embedding.settings import EmbeddingSettings

    starting = asyncio.create_task(ModelProcess.start(model_config(EmbeddingSettings(model=str(MODEL)))))
    deadline = time.monotonic() + 30
    while not (children := [pid for pid in child_pids(os.getpid())
                            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]):
        assert time.monotonic() < deadline and not starting.done()
        await asyncio.sleep(0.005)
    os.kill(children[0], signal.SIGKILL)  # loading takes it a second or more: it has not answered yet
    with pytest.raises(RuntimeError, match="exited with code -9 while loading the model"):
        await starting
