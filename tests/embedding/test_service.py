"""The embedding service's request handling around the model process (stood in for: stand_ins.py): what it asks
of the model process, its failures as the errors a client gets, the limits, and what the model process is told to
load."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from microservices.embedding.model_process import ModelError, ModelProcessStopped
from microservices.embedding.service import SMALL_INPUT_ITEMS, model_config, small_input
from microservices.embedding.settings import EmbeddingSettings
from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.names import EMBEDDING_CONFIG
from tests.embedding.stand_ins import service


async def test_token_ids_are_checked_then_decoded_and_texts_counted_by_the_model_process():
    svc = service()
    texts = await svc.texts_of([[1, 2, 3], [4]])
    assert texts == ["xxx", "x"]
    await svc.embed(texts)
    assert svc.model.calls == [("decode", ([[1, 2, 3], [4]],)), ("count_tokens", (["xxx", "x"],))]
    with pytest.raises(APIError, match="Token id 100") as refused:  # the stand-in's vocabulary: ids 0 to 99
        await svc.texts_of([7, 100], "inputs")
    assert refused.value.param == "inputs" and len(svc.model.calls) == 2  # nothing decoded


async def test_inputs_are_bounded_before_anything_is_decoded():
    svc = service(max_inputs=2)
    with pytest.raises(APIError, match=r"Too many inputs: 3 \(at most 2"):
        await svc.texts_of([[1], [2], [3]])
    with pytest.raises(APIError, match="Input 1 is empty"):
        await svc.texts_of(["a", " \n"])
    assert svc.model.calls == []


def test_which_inputs_are_small_enough_to_check_on_the_loop():
    many = SMALL_INPUT_ITEMS + 1
    assert small_input("a query") and small_input(["a"] * SMALL_INPUT_ITEMS) and small_input([[1, 2], [3]])
    assert not small_input(["a"] * many) and not small_input([[1] * many]) and not small_input([1] * many)


@pytest.mark.parametrize(("failure", "kind", "message"), [
    (ModelProcessStopped("The embedding model process stopped; retry."), ErrorKind.UNAVAILABLE, "retry"),
    (ModelError("RuntimeError", "Exception from src/inference"), ErrorKind.INTERNAL, "Embedding failed: RuntimeError."),
])
async def test_the_model_process_s_failures_are_a_503_to_retry_or_a_500_without_its_words(failure, kind, message):
    svc = service()
    svc.model.failure = failure
    for work in (svc.embed(["a"]), svc.texts_of([[1]]), svc.rerank("q", ["a"])):
        with pytest.raises(APIError) as refused:
            await work
        assert refused.value.kind is kind and message in refused.value.message
        assert "src/inference" not in refused.value.message


async def test_reject_policy_names_the_input_and_its_tokens():
    svc = service()
    svc.max_tokens = 2  # the stand-in counts 3 tokens a text
    with pytest.raises(APIError, match="Input 0 has 3 tokens; this model accepts at most 2") as refused:
        await svc.embed(["a"], truncate=False, field="inputs")
    assert refused.value.param == "inputs"
    truncated = await svc.embed(["a", "b"], truncate=True)
    assert (truncated.prompt_tokens, truncated.truncated) == (4, 2)


async def test_a_request_the_batcher_takes_at_once_is_counted_in_the_same_call():
    svc = service()
    svc.batcher.at_once = True
    embedded = await svc.embed(["a", "b"])
    assert (embedded.vectors, embedded.prompt_tokens, embedded.truncated) == ([[3.0, 4.0]] * 2, 6, 0)
    assert svc.model.calls == [] and svc.batcher.uncounted == [(["a", "b"], None)]  # no count of its own
    svc.max_tokens = 2  # the stand-in counts 3 tokens a text
    truncated = await svc.embed(["a"], truncate=True)
    assert (truncated.prompt_tokens, truncated.truncated) == (2, 1)
    with pytest.raises(APIError, match="Input 0 has 3 tokens; this model accepts at most 2"):
        await svc.embed(["a"], truncate=False)
    assert svc.batcher.uncounted[-1] == (["a"], 2)  # refused in the model process: nothing embedded


async def test_tei_normalize():
    with pytest.raises(APIError, match="normalize"):
        await service(normalize=True).embed(["a"], normalize=False)
    raw = service(normalize=False)
    assert (await raw.embed(["a"])).vectors == [[3.0, 4.0]]
    assert (await raw.embed(["a"], normalize=True)).vectors == [pytest.approx([0.6, 0.8])]


def test_rerank_documents_are_bounded_per_request():
    svc = service(max_inputs=2)
    with pytest.raises(APIError, match="at most 2") as refused:
        asyncio.run(svc.rerank("q", ["a", "b", "c"]))
    assert refused.value.param == "documents"
    assert asyncio.run(svc.rerank("q", ["a", "b"])) == [(0, 1.0), (1, 1.0)]
    assert svc.model.calls == [("rerank", ("q", ["a", "b"]))]


def test_without_a_reranker_rerank_is_404():
    svc = service()
    svc.has_reranker = False
    with pytest.raises(APIError, match="RERANK_MODEL_PATH") as refused:
        asyncio.run(svc.rerank("q", ["a"]))
    assert refused.value.kind is ErrorKind.NOT_FOUND and svc.model.calls == []


def test_the_model_process_is_told_the_model_its_limits_and_precision(tmp_path):
    (tmp_path / "openvino_model.xml").write_text("<net/>")
    (tmp_path / EMBEDDING_CONFIG).write_text('{"name": "owner/encoder", "max_length": 128}')
    settings = EmbeddingSettings(model=str(tmp_path), max_input_tokens=512, inference_precision="f32",
                                 plugin_config='{"NUM_STREAMS": 1}', reranker_model="/models/cross")
    config = model_config(settings)
    assert (config.folder, config.info.name, config.max_tokens) == (tmp_path, "owner/encoder", 128)
    assert (config.plugin_config, config.precision, config.reranker) == ({"NUM_STREAMS": 1}, "f32",
                                                                         Path("/models/cross"))


def test_a_folder_without_a_model_is_refused_before_any_process_starts(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m ovgenai_models defaults"):
        model_config(EmbeddingSettings(model=str(tmp_path)))
