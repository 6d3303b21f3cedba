"""The default models' vocabulary sizes, read from their prepared files."""

from __future__ import annotations

from ovgenai_common.tokens import vocabulary_size
from tests.support.servers import DEFAULT_MODEL, MODELS


def test_vocabulary_sizes_of_the_default_models():
    import openvino_genai

    assert vocabulary_size(openvino_genai.Tokenizer(str(MODELS / DEFAULT_MODEL))) == 49152
    # BERT's tokenizer spells a few tokens alike; the size is the id range, not the count of spellings.
    embedding = MODELS / "sentence-transformers/all-MiniLM-L6-v2"
    assert vocabulary_size(openvino_genai.Tokenizer(str(embedding))) == 30522
