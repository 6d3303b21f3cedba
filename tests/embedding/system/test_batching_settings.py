"""The batching and input limits of the embedding service, each observed on the real model: MAX_BATCH_SIZE,
MAX_BATCH_TOKENS, BATCH_WAIT_MS, MAX_INPUT_TOKENS, and the API key. One server carries all of them.

Batches are read from the service's own `embedding_batch_size` histogram (one observation per pipeline call, its
value the texts in that call): its count and sum say how many calls a request took and how many texts they held."""

from __future__ import annotations

import concurrent.futures
from functools import cache

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.servers import MODELS, RemoteServer

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
KEY = "embed-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
MAX_BATCH_SIZE = 4
MAX_INPUT_TOKENS = 16
MAX_BATCH_TOKENS = 40  # two texts of MAX_INPUT_TOKENS fit, three do not
# Long enough that two requests sent together always arrive within it, so they must share one pipeline call.
BATCH_WAIT_MS = 1000
LONG = ("The lighthouse keeper counted the ships that passed the northern cape every evening, and wrote each name "
        "into a ledger that is kept in the harbour museum to this day.")


@pytest.fixture(scope="module")
def server():
    env = {"EMBEDDING_MODEL_PATH": str(MODELS / MODEL), "MAX_BATCH_SIZE": str(MAX_BATCH_SIZE),
           "MAX_BATCH_TOKENS": str(MAX_BATCH_TOKENS), "BATCH_WAIT_MS": str(BATCH_WAIT_MS),
           "MAX_INPUT_TOKENS": str(MAX_INPUT_TOKENS), "SERVICE_API_KEY": KEY}
    with RemoteServer("ovgenai_services.embedding", env=env) as running:
        yield running


def embed(server, texts, timeout: float = 60) -> httpx.Response:
    response = httpx.post(server.url + "/v1/embeddings", json={"input": texts}, headers=AUTH, timeout=timeout)
    assert response.status_code == 200, response.text
    return response


def batches(server) -> tuple[float, float]:
    """(pipeline calls, texts embedded) so far."""
    text = httpx.get(server.url + "/metrics", headers=AUTH, timeout=10).text
    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    return values["embedding_batch_size_count"], values["embedding_batch_size_sum"]


def batches_of(server, send) -> tuple[int, int]:
    """How many pipeline calls, and how many texts, `send()` caused."""
    calls, texts = batches(server)
    send()
    after_calls, after_texts = batches(server)
    return int(after_calls - calls), int(after_texts - texts)


@cache
def tokenizer():
    """The served model's own tokenizer (the one the service counts with)."""
    import openvino_genai

    return openvino_genai.Tokenizer(str(MODELS / MODEL))


def token_ids(text: str) -> list[int]:
    return [int(t) for t in tokenizer().encode(text).input_ids.data[0]]


def token_count(text: str) -> int:
    return len(token_ids(text))


def test_api_key_protects_every_route_but_the_probes(server):
    denied = httpx.post(server.url + "/v1/embeddings", json={"input": "hello"}, timeout=30)
    assert denied.status_code == 401 and denied.json()["error"]["code"] == "invalid_api_key"
    wrong = httpx.post(server.url + "/v1/embeddings", json={"input": "hello"}, timeout=30,
                       headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    for path in ("/health", "/v1/health_check", "/live"):
        assert httpx.get(server.url + path, timeout=10).status_code == 200, path
    for path in ("/embed", "/rerank"):  # TEI's routes too
        assert httpx.post(server.url + path, json={"inputs": "hello"}, timeout=30).status_code == 401, path
    assert httpx.get(server.url + "/metrics", timeout=10).status_code == 401
    assert len(embed(server, "hello").json()["data"][0]["embedding"]) == 384


def test_max_batch_size_splits_a_large_request(server):
    short = [f"note {i}" for i in range(10)]  # a few tokens each: only the size limit applies
    assert all(token_count(t) * MAX_BATCH_SIZE <= MAX_BATCH_TOKENS for t in short)
    calls, texts = batches_of(server, lambda: embed(server, short))
    assert (calls, texts) == (3, 10)  # 4 + 4 + 2


def test_max_batch_tokens_splits_long_texts(server):
    assert token_count(LONG) > MAX_INPUT_TOKENS  # each counts as MAX_INPUT_TOKENS once truncated
    calls, texts = batches_of(server, lambda: embed(server, [LONG] * 6))
    assert (calls, texts) == (3, 6)  # 2 + 2 + 2: a third text of 16 tokens would pass 40


def test_batch_wait_lets_concurrent_requests_share_a_call(server):
    def send_two() -> None:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            for response in pool.map(lambda text: embed(server, text), ["first request", "second request"]):
                assert len(response.json()["data"]) == 1

    assert batches_of(server, send_two) == (1, 2)


def test_max_input_tokens_truncates_to_the_first_tokens(server, embedding_service):
    response = embed(server, LONG)
    assert response.headers["x-inputs-truncated"] == "1"
    assert response.json()["usage"]["prompt_tokens"] == MAX_INPUT_TOKENS
    # What the model sees: [CLS], the text's first 14 tokens, [SEP]. The default service (256 tokens) embeds that
    # prefix whole: the same vector.
    prefix = tokenizer().decode(token_ids(LONG)[1:MAX_INPUT_TOKENS - 1])
    reference = httpx.post(embedding_service.url + "/v1/embeddings", json={"input": prefix}, timeout=60).json()
    whole = httpx.post(embedding_service.url + "/v1/embeddings", json={"input": LONG}, timeout=60).json()
    served = np.array(response.json()["data"][0]["embedding"])
    assert served @ np.array(reference["data"][0]["embedding"]) > 0.999
    assert served @ np.array(whole["data"][0]["embedding"]) < 0.99  # the rest of the text would have counted
