"""The fast tokenizer over a tiny word-level tokenizer.json written here: whole texts to right-padded ids and masks,
whatever padding or cut the file asks for; loaded only where it gives the OpenVINO tokenizer's ids for every probe
text. The default model's two tokenizers agree: system/test_embedder.py."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from ovgenai_services.embedding.fast_tokenizer import PROBE_TEXTS, FastTokenizer, load_fast_tokenizer

VOCABULARY = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4, "b": 5}


def write_tokenizer(folder, padding_length=None, truncation_length=None):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tokenizer = Tokenizer(models.WordLevel(VOCABULARY, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                             special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    if padding_length:  # as sentence-transformers' exports ask: every text padded to a fixed length
        tokenizer.enable_padding(length=padding_length, pad_id=0, pad_token="[PAD]")
    if truncation_length:
        tokenizer.enable_truncation(truncation_length)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def expected_ids(text: str) -> list[int]:
    return [2, *(VOCABULARY.get(word, 1) for word in text.split()), 3]


class ReferenceTokenizer:
    """The OpenVINO tokenizer's interface, giving the word-level ids (`wrong`: one text's ids off by one)."""

    def __init__(self, wrong: str | None = None):
        self.wrong = wrong

    def encode(self, texts):
        [text] = texts
        ids = expected_ids(text)
        if text == self.wrong:
            ids[-1] += 1
        return SimpleNamespace(input_ids=SimpleNamespace(data=np.array([ids], dtype=np.int64)))


def test_texts_become_their_whole_tokens_right_padded_with_the_pad_id(tmp_path):
    fast = FastTokenizer(write_tokenizer(tmp_path, padding_length=16, truncation_length=3) / "tokenizer.json")
    ids, mask = fast.encode(["a b a b a", "b", ""], pad_id=9)
    assert ids.dtype == mask.dtype == np.int64
    assert ids.tolist() == [[2, 4, 5, 4, 5, 4, 3], [2, 5, 3, 9, 9, 9, 9], [2, 3, 9, 9, 9, 9, 9]]
    assert mask.tolist() == [[1] * 7, [1] * 3 + [0] * 4, [1] * 2 + [0] * 5]


def test_it_loads_where_it_gives_the_openvino_tokenizer_s_ids_for_every_probe_text(tmp_path):
    assert isinstance(load_fast_tokenizer(write_tokenizer(tmp_path), ReferenceTokenizer()), FastTokenizer)


def test_one_probe_text_with_other_ids_leaves_every_text_to_the_openvino_tokenizer(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        assert load_fast_tokenizer(write_tokenizer(tmp_path), ReferenceTokenizer(wrong=PROBE_TEXTS[3])) is None
    assert "other tokens than the OpenVINO tokenizer" in caplog.text


@pytest.mark.parametrize("content", [None, "{not json"])
def test_a_folder_without_a_readable_tokenizer_json_has_no_fast_tokenizer(tmp_path, content):
    if content is not None:
        (tmp_path / "tokenizer.json").write_text(content)
    assert load_fast_tokenizer(tmp_path, ReferenceTokenizer()) is None
