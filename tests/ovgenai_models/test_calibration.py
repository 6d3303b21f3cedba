"""The built-in calibration corpus for full int8 export: offline, fixed, passages and sentences."""

from __future__ import annotations

from ovgenai_models.calibration import builtin_texts, file_texts


def test_builtin_texts_are_fixed_and_mixed():
    texts = builtin_texts(100)
    assert texts == builtin_texts(100) and len(texts) == 100 and len(set(texts)) == 100
    passages, sentences = texts[:50], texts[50:]
    assert min(len(t) for t in passages) > 40 and max(len(t) for t in passages) <= 1500
    assert all(3 < len(s.split()) < 25 for s in sentences)


def test_file_texts_are_its_non_empty_lines(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("first text\n\n  second text  \n", encoding="utf-8")
    assert file_texts(path) == ["first text", "second text"]
