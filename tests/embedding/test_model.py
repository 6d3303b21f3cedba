"""What an exported embedding model says about itself (embedding_config.json, written by the export tool): its
pooling, normalization, longest input, dimensions and name; a folder without the file gets the defaults the export
tool writes for a sentence-transformers model; its prompts (sentence-transformers' config) and whether it is a
Matryoshka model (its Hugging Face config, as vLLM reads it); what the model process is given to load and what the
loaded model answers, over fakes of the models. Loading the real ones: system/test_embedding_service.py."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from ovgenai_common.names import EMBEDDING_CONFIG, SENTENCE_TRANSFORMERS_CONFIG
from ovgenai_services.embedding import model
from ovgenai_services.embedding.model import EmbeddingModelInfo, ModelConfig, ModelFacts, Models, read_model_info
from ovgenai_services.embedding.prompts import Prompts


def test_the_recorded_pooling_and_limits_are_read(tmp_path):
    (tmp_path / EMBEDDING_CONFIG).write_text(json.dumps({
        "name": "owner/encoder", "pooling": "cls", "normalize": False, "max_length": 8192, "dimensions": 1024}))
    assert read_model_info(tmp_path, None) == EmbeddingModelInfo("owner/encoder", "cls", False, 8192, 1024)


def test_the_served_name_wins_over_the_recorded_one(tmp_path):
    (tmp_path / EMBEDDING_CONFIG).write_text(json.dumps({"name": "owner/encoder"}))
    assert read_model_info(tmp_path, "served").name == "served"


def test_a_folder_without_a_record_is_mean_pooled_normalized_and_named_after_itself(tmp_path):
    folder = tmp_path / "my-encoder"
    folder.mkdir()
    assert read_model_info(folder, None) == EmbeddingModelInfo("my-encoder", "mean", True, 512, None)


def test_the_model_s_own_prompts_are_read_beside_it(tmp_path):
    (tmp_path / SENTENCE_TRANSFORMERS_CONFIG).write_text(json.dumps({
        "prompts": {"query": "query: ", "document": "passage: ", "unset": None}, "default_prompt_name": "query",
        "similarity_fn_name": "cosine"}))
    assert read_model_info(tmp_path, None).prompts == Prompts({"query": "query: ", "document": "passage: "}, "query")
    (tmp_path / SENTENCE_TRANSFORMERS_CONFIG).write_text(json.dumps({"prompts": {}, "default_prompt_name": "query"}))
    with pytest.raises(ValueError, match="config_sentence_transformers.json: The default prompt 'query' is not"):
        read_model_info(tmp_path, None)


@pytest.mark.parametrize(("hf_config", "matryoshka", "sizes"), [
    ({"hidden_size": 384}, False, ()),
    ({"is_matryoshka": True}, True, ()),
    ({"matryoshka_dimensions": [64, 128, 256]}, True, (64, 128, 256)),
])
def test_a_matryoshka_model_is_known_by_its_hugging_face_config(tmp_path, hf_config, matryoshka, sizes):
    (tmp_path / "config.json").write_text(json.dumps(hf_config))
    info = read_model_info(tmp_path, None)
    assert (info.matryoshka, info.matryoshka_dimensions) == (matryoshka, sizes)


def config(tmp_path, **changes) -> ModelConfig:
    info = EmbeddingModelInfo("m", "mean", True, 512, None)
    return replace(ModelConfig(tmp_path, "CPU", info, 256, {"NUM_STREAMS": 1}), **changes)


def test_a_restart_keeps_the_precision_the_first_start_chose(tmp_path):
    first = config(tmp_path, precision="auto")
    again = first.with_hint("f32")
    assert again.plugin_config == {"NUM_STREAMS": 1, "INFERENCE_PRECISION_HINT": "f32"} and again.precision == "auto"
    assert first.plugin_config == {"NUM_STREAMS": 1}  # the first start's own config is left as it was
    assert first.with_hint(None) is first  # a device without a hint: nothing to keep


class FakeEmbedder:
    """Embeds each text as [len(text), 1.0], counting a token a character."""

    def __init__(self, hint):
        self.hint = hint

    def embed(self, texts):
        return np.array([[float(len(text)), 1.0] for text in texts], dtype=np.float32)

    def embed_counted(self, texts, limits, batch_tokens, cuts=None):
        self.batch_tokens, self.cuts = batch_tokens, cuts
        counts = [len(text) for text in texts]
        kept = [limit is None or n <= limit for n, limit in zip(counts, limits, strict=True)]
        return counts, self.embed(texts) * np.array(kept, dtype=np.float32)[:, None] if any(kept) else None


class FakeTokenizer:
    def decode(self, ids):
        return "-".join(map(str, ids))

    def get_vocab(self):
        return {"a": 0, "b": 41}


@pytest.fixture
def loaded(monkeypatch):
    """Models(config) over the fakes above: `timed` is what worth_timing says, `loads` what was loaded."""
    state = SimpleNamespace(timed=False, loads=[])

    def embedder(config, properties):
        state.loads.append(("embedding", config.max_tokens, properties))
        return FakeEmbedder(properties.get("INFERENCE_PRECISION_HINT"))

    def reranker(folder, *_):
        state.loads.append(("rerank", folder))
        return SimpleNamespace(rerank=lambda _query, _documents: [(np.int64(1), np.float32(0.5))])

    monkeypatch.setattr(model, "load_tokenizer", lambda _folder: FakeTokenizer())
    monkeypatch.setattr(model, "load_embedder", embedder)
    monkeypatch.setattr(model, "load_rerank_pipeline", reranker)
    monkeypatch.setattr(model, "log_computed_precision", lambda *_: None)
    monkeypatch.setattr(model, "worth_timing", lambda *_: state.timed)
    monkeypatch.setattr(model, "faster_precision", lambda load, _embed: ("f32", load("f32"), {"f32": 2.0}))
    return state


def test_the_loaded_model_decodes_embeds_and_reranks(tmp_path, loaded):
    models = Models(config(tmp_path, reranker=tmp_path / "cross", precision="bf16"))
    assert models.facts == ModelFacts(dimensions=2, vocabulary=42, hint="bf16")  # dimensions probed: none recorded
    assert models.decode([[1, 2], [3]]) == ["1-2", "3"]
    counts, vectors = models.embed(["abc", "a"], [None, None])
    assert counts == [3, 1] and vectors.dtype == np.float32 and vectors.tolist() == [[3.0, 1.0], [1.0, 1.0]]
    assert models.rerank("q", ["x", "y"]) == [(1, 0.5)] and type(models.rerank("q", ["x"])[0][0]) is int
    assert [load[0] for load in loaded.loads] == ["embedding", "rerank"]
    assert loaded.loads[0][1] == 256 and loaded.loads[0][2]["NUM_STREAMS"] == 1


@pytest.mark.usefixtures("loaded")
def test_a_batch_is_counted_and_embedded_in_one_call_a_text_over_its_limit_left_out(tmp_path):
    models = Models(config(tmp_path, batch_tokens=512))
    counts, vectors = models.embed(["abc", "a"], [None, 2])
    assert counts == [3, 1] and vectors.tolist() == [[3.0, 1.0], [1.0, 1.0]]
    assert models.embedder.batch_tokens == 512  # the model process cuts the call's inferences at a batch's tokens
    counts, vectors = models.embed(["abc", "a"], [2, None])  # a text over its limit: a row of zeros
    assert counts == [3, 1] and vectors.tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert models.embed(["abc"], [2]) == ([3], None)  # nothing embedded
    models.embed(["abc", "a"], [None, None], [2, None])
    assert models.embedder.cuts == [2, None]  # each text's cut reaches the embedder


def test_a_timed_start_serves_and_reports_the_faster_precision(tmp_path, loaded):
    loaded.timed = True
    info = EmbeddingModelInfo("m", "mean", True, 512, 384)
    models = Models(config(tmp_path, info=info))
    assert models.facts == ModelFacts(dimensions=384, vocabulary=42, hint="f32")  # the recorded dimensions
    assert models.embedder.hint == "f32"
    with pytest.raises(LookupError, match="no reranker"):
        models.rerank("q", ["x"])
