"""The embedding service's sequence around stand-ins for the model process and the batcher (stand_ins.py): token ids
decoded before anything is embedded, each request's texts submitted once (counted and embedded in one call of the
model) with its limit, the refusal of a text over it, the model process's failures as the errors a client gets,
each API's answer (a prompt before each text, vectors cut to the dimensions asked for, vLLM's truncate_prompt_tokens),
and what the model process is told to load, the operator's prompts and Matryoshka sizes over the model's. The checks
themselves: test_inputs.py; the shapes: test_answers.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.names import EMBEDDING_CONFIG, SENTENCE_TRANSFORMERS_CONFIG
from ovgenai_services.embedding.batcher import QueueFull
from ovgenai_services.embedding.model_process import ModelError, ModelProcessStopped
from ovgenai_services.embedding.prompts import Prompts
from ovgenai_services.embedding.protocol import EmbeddingRequest, RerankRequest, TEIEmbedRequest
from ovgenai_services.embedding.service import model_config
from ovgenai_services.embedding.settings import EmbeddingSettings
from tests.embedding.stand_ins import service


async def test_token_ids_are_checked_then_decoded_and_the_texts_submitted_once():
    svc = service()
    texts = await svc.texts_of([[1, 2, 3], [4]])
    assert texts == ["xxx", "x"]
    embedded = await svc.embed(texts)
    assert (embedded.vectors, embedded.prompt_tokens, embedded.truncated) == ([[3.0, 4.0]] * 2, 6, 0)
    assert svc.model.calls == [("decode", ([[1, 2, 3], [4]],))]  # no count of its own: the batcher's call counts
    assert svc.batcher.submitted == [(["xxx", "x"], None)]
    with pytest.raises(APIError, match="Token id 100") as refused:  # the stand-in's vocabulary: ids 0 to 99
        await svc.texts_of([7, 100], "inputs")
    assert refused.value.param == "inputs" and len(svc.model.calls) == 1  # nothing decoded


async def test_inputs_are_bounded_before_anything_is_decoded():
    svc = service(max_inputs=2)
    with pytest.raises(APIError, match=r"Too many inputs: 3 \(at most 2"):
        await svc.texts_of([[1], [2], [3]])
    with pytest.raises(APIError, match="Input 1 is empty"):
        await svc.texts_of(["a", " \n"])
    with pytest.raises(APIError, match="Too many inputs"):  # a large input is checked on a worker thread
        await svc.texts_of([[1]] * 100)
    assert svc.model.calls == []


@pytest.mark.parametrize(("failure", "kind", "message"), [
    (ModelProcessStopped("The embedding model process stopped; retry."), ErrorKind.UNAVAILABLE, "retry"),
    (ModelError("RuntimeError", "Exception from src/inference"), ErrorKind.INTERNAL, "Embedding failed: RuntimeError."),
    (QueueFull(), ErrorKind.OVERLOADED, "retry later"),
    (ValueError("Exception from src/inference"), ErrorKind.INTERNAL, "Embedding failed: ValueError."),
])
async def test_the_model_process_s_failures_are_a_503_to_retry_or_a_500_without_its_words(failure, kind, message):
    svc = service()
    svc.model.failure = svc.batcher.failure = failure
    works = [svc.embed(["a"])]
    if not isinstance(failure, QueueFull | ValueError):  # the batcher's own: the model process's other calls
        works += [svc.texts_of([[1]]), svc.rerank("q", ["a"])]
    for work in works:
        with pytest.raises(APIError) as refused:
            await work
        assert refused.value.kind is kind and message in refused.value.message
        assert "src/inference" not in refused.value.message


async def test_a_text_over_the_limit_is_refused_in_the_same_call_by_name_and_tokens_or_truncated():
    svc = service(max_tokens=2)  # the stand-in counts 3 tokens a text
    with pytest.raises(APIError, match="Input 0 has 3 tokens; this model accepts at most 2") as refused:
        await svc.embed(["a"], truncate=False, field="inputs")
    assert refused.value.param == "inputs" and svc.batcher.submitted == [(["a"], 2)]  # refused in that call
    truncated = await svc.embed(["a", "b"], truncate=True)
    assert (truncated.prompt_tokens, truncated.truncated) == (4, 2)
    assert svc.batcher.submitted[-1] == (["a", "b"], None)


async def test_the_service_s_truncation_policy_is_the_default():
    svc = service(max_tokens=2, truncate=False)
    with pytest.raises(APIError, match="Input 0 has 3 tokens"):
        await svc.embed(["a"])
    assert (await svc.embed(["a"], truncate=True)).truncated == 1


async def test_each_api_s_answer():
    svc = service(normalize=False)
    answer, truncated = await svc.openai_embeddings(EmbeddingRequest(input=["a", "b"], model="named"))
    assert answer["usage"] == {"prompt_tokens": 6, "total_tokens": 6} and answer["model"] == "named"
    assert [d["embedding"] for d in answer["data"]] == [[3.0, 4.0]] * 2 and truncated == 0
    assert await svc.tei_embeddings(TEIEmbedRequest(inputs="a")) == ([[3.0, 4.0]], 0)
    normalized, _ = await svc.tei_embeddings(TEIEmbedRequest(inputs="a", normalize=True))
    assert normalized == [pytest.approx([0.6, 0.8])]
    ranked = await svc.rerank_results(RerankRequest(query="q", documents=["a", "b"], top_n=1))
    assert ranked == {"model": "reranker", "results": [{"index": 0, "relevance_score": 1.0}]}
    assert await svc.tei_rerank_results(RerankRequest(query="q", texts=["a"])) == [{"index": 0, "score": 1.0}]


async def test_the_chosen_prompt_is_put_before_each_text_and_its_tokens_are_counted():
    svc = service(prompts=Prompts({"query": "query: ", "passage": "passage: "}))
    answer, _ = await svc.openai_embeddings(EmbeddingRequest(input=["a", "b"], input_type="query"))
    assert svc.batcher.submitted[-1] == (["query: a", "query: b"], None)
    assert answer["usage"]["prompt_tokens"] == 6  # as the model process counted them, prompt included
    await svc.openai_embeddings(EmbeddingRequest(input="a", prompt_name="passage"))
    await svc.tei_embeddings(TEIEmbedRequest(inputs="a", prompt_name="query"))
    await svc.openai_embeddings(EmbeddingRequest(input="a"))
    assert [texts for texts, _ in svc.batcher.submitted[1:]] == [["passage: a"], ["query: a"], ["a"]]


async def test_a_request_is_refused_before_anything_is_decoded_or_embedded():
    svc = service(prompts=Prompts({"query": "query: "}))
    for body, param in ((EmbeddingRequest(input=[[1]], prompt_name="sts"), "prompt_name"),
                        (EmbeddingRequest(input=[[1]], dimensions=1), "dimensions"),
                        (EmbeddingRequest(input=[[1]], truncate_prompt_tokens=0), "truncate_prompt_tokens")):
        with pytest.raises(APIError) as refused:
            await svc.openai_embeddings(body)
        assert refused.value.param == param
    with pytest.raises(APIError, match="Unknown prompt_name"):
        await svc.tei_embeddings(TEIEmbedRequest(inputs="a", prompt_name="sts"))
    assert svc.model.calls == [] and svc.batcher.submitted == []


async def test_a_matryoshka_model_s_vectors_are_cut_and_made_unit_again_where_it_normalizes():
    for normalize, vector in ((True, [1.0]), (False, [3.0])):
        svc = service(normalize=normalize, matryoshka=True)  # the stand-in's vectors: [3, 4]
        answer, _ = await svc.openai_embeddings(EmbeddingRequest(input="a", dimensions=1))
        assert answer["data"][0]["embedding"] == vector
        assert await svc.tei_embeddings(TEIEmbedRequest(inputs="a", dimensions=1)) == ([vector], 0)
    answer, _ = await svc.openai_embeddings(EmbeddingRequest(input="a", dimensions=2))
    assert answer["data"][0]["embedding"] == [3.0, 4.0]  # the model's own size: as it is


async def test_truncate_prompt_tokens_cuts_each_text_whatever_the_service_s_policy():
    svc = service(max_tokens=8, truncate=False)  # the stand-in counts 3 tokens a text
    answer, truncated = await svc.openai_embeddings(EmbeddingRequest(input=["a", "b"], truncate_prompt_tokens=2))
    assert svc.batcher.submitted[-1] == (["a", "b"], None) and svc.batcher.cuts[-1] == 2
    assert answer["usage"]["prompt_tokens"] == 4 and truncated == 2
    await svc.openai_embeddings(EmbeddingRequest(input="a", truncate_prompt_tokens=-1))  # the model's limit
    assert svc.batcher.submitted[-1] == (["a"], None) and svc.batcher.cuts[-1] is None
    await svc.openai_embeddings(EmbeddingRequest(input="a"))  # unset: the service's policy (here: refuse)
    assert svc.batcher.submitted[-1] == (["a"], 8)


async def test_a_normalized_model_refuses_tei_s_normalize_false_before_anything_is_embedded():
    with pytest.raises(APIError, match="normalize") as refused:
        await service(normalize=True).tei_embeddings(TEIEmbedRequest(inputs="a", normalize=False))
    assert refused.value.param == "normalize"


def test_rerank_documents_are_bounded_per_request():
    svc = service(max_inputs=2)
    with pytest.raises(APIError, match="at most 2") as refused:
        asyncio.run(svc.rerank("q", ["a", "b", "c"]))
    assert refused.value.param == "documents"
    assert asyncio.run(svc.rerank("q", ["a", "b"])) == [(0, 1.0), (1, 1.0)]
    assert svc.model.calls == [("rerank", ("q", ["a", "b"]))]


def test_without_a_reranker_rerank_is_404_before_its_documents_are_checked():
    svc = service()
    svc.has_reranker = False
    with pytest.raises(APIError, match="RERANK_MODEL_PATH") as refused:
        asyncio.run(svc.rerank("q", []))
    assert refused.value.kind is ErrorKind.NOT_FOUND and svc.model.calls == []


def test_the_model_process_is_told_the_model_its_limits_and_precision(tmp_path):
    (tmp_path / "openvino_model.xml").write_text("<net/>")
    (tmp_path / EMBEDDING_CONFIG).write_text('{"name": "owner/encoder", "max_length": 128}')
    settings = EmbeddingSettings(model=str(tmp_path), max_input_tokens=512, inference_precision="f32",
                                 plugin_config='{"NUM_STREAMS": 1}', reranker_model="/models/cross",
                                 max_batch_tokens=1024)
    config = model_config(settings)
    assert (config.folder, config.info.name, config.max_tokens) == (tmp_path, "owner/encoder", 128)
    assert (config.plugin_config, config.precision, config.reranker) == ({"NUM_STREAMS": 1}, "f32",
                                                                         Path("/models/cross"))
    assert config.batch_tokens == 1024  # the model process cuts a batch's inferences by the tokens it counts


def test_the_operator_s_prompts_and_matryoshka_sizes_go_over_the_model_s(tmp_path):
    (tmp_path / "openvino_model.xml").write_text("<net/>")
    (tmp_path / SENTENCE_TRANSFORMERS_CONFIG).write_text('{"prompts": {"query": "query: ", "passage": "passage: "}}')
    (tmp_path / "config.json").write_text('{"matryoshka_dimensions": [128, 256]}')
    info = model_config(EmbeddingSettings(model=str(tmp_path))).info
    assert info.prompts == Prompts({"query": "query: ", "passage": "passage: "})
    assert (info.matryoshka, info.matryoshka_dimensions) == (True, (128, 256))
    info = model_config(EmbeddingSettings(model=str(tmp_path), prompts='{"query": "Q: ", "code": "code: "}',
                                          default_prompt_name="code", matryoshka_dimensions="64")).info
    assert info.prompts == Prompts({"query": "Q: ", "passage": "passage: ", "code": "code: "}, "code")
    assert (info.matryoshka, info.matryoshka_dimensions) == (True, (64,))
    info = model_config(EmbeddingSettings(model=str(tmp_path), matryoshka=False)).info
    assert (info.matryoshka, info.matryoshka_dimensions) == (False, ())
    (tmp_path / "config.json").unlink()
    info = model_config(EmbeddingSettings(model=str(tmp_path), matryoshka=True)).info
    assert (info.matryoshka, info.matryoshka_dimensions) == (True, ())
    with pytest.raises(ValueError, match="DEFAULT_PROMPT_NAME: The default prompt 'sts' is not one of the prompts"):
        model_config(EmbeddingSettings(model=str(tmp_path), default_prompt_name="sts"))


def test_a_folder_without_a_model_is_refused_before_any_process_starts(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m ovgenai_models defaults"):
        model_config(EmbeddingSettings(model=str(tmp_path)))
