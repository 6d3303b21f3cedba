"""Names every part of the stack agrees on: the default models and the files model preparation writes for them."""

from __future__ import annotations

DEFAULT_LLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
DEFAULT_EMBEDDING = "sentence-transformers/all-MiniLM-L6-v2"
# Written by the export tool beside an embedding model's IR: pooling, normalization, dimensions, max length.
EMBEDDING_CONFIG = "embedding_config.json"
# sentence-transformers' own configuration beside a model: its prompts ("prompts", "default_prompt_name").
SENTENCE_TRANSFORMERS_CONFIG = "config_sentence_transformers.json"
