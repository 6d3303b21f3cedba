"""`OpenVINOPromptBuilder`: a model's chat template and its openvino_genai tokenizer, in the API process, so that a
prompt's length is known (and refused) before anything is queued."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ovgenai_common.openvino_threads import prime_tokenizer_outputs
from ovgenai_common.tokens import truncation_limit, vocabulary_size

from .chat_template import FALLBACK_TEMPLATE, ChatTemplate

logger = logging.getLogger(__name__)


class OpenVINOPromptBuilder:
    def __init__(self, path: Path, folder: Path, max_context: int, chat_template: str | None = None):
        import openvino_genai

        # One inference thread, left where this process runs (OpenVINO's pinning could put it on an engine core): a
        # prompt's tokens take a fraction of a millisecond either way, and more threads here would interrupt the
        # engine's (engine/api_process/placement.py).
        self.tokenizer = openvino_genai.Tokenizer(str(path), INFERENCE_NUM_THREADS=1, ENABLE_CPU_PINNING=False)
        prime_tokenizer_outputs(self.tokenizer)  # before request threads tokenize (ovgenai_common/openvino_threads.py)
        self.template = ChatTemplate.resolve(folder, self.tokenizer, chat_template)
        self.vocabulary = vocabulary_size(self.tokenizer)
        self.tokenizer_limit = truncation_limit(self.tokenizer, max_context)
        self.longest_token = longest_token(self.tokenizer)
        self._vocab: dict[int, str] | None = None

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               add_generation_prompt: bool, variables: dict[str, Any] | None) -> str:
        return self.template.render(self.tokenizer, messages, tools, add_generation_prompt, variables)

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).input_ids.data[0].tolist()

    def decode(self, token_ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=skip_special_tokens)

    def token_strings(self, token_ids: list[int]) -> list[str]:
        if self._vocab is None:  # built once, at the first request that asks: ~50k entries
            # get_vocab() gives each token's bytes (get_vocab_vector() fails on byte-level pieces that are not
            # UTF-8 on their own); such a piece is shown with U+FFFD where its bytes do not decode.
            self._vocab = {i: b.decode("utf-8", "replace") for b, i in self.tokenizer.get_vocab().items()}
        return [self._vocab.get(t, "") for t in token_ids]

    def tokenizer_config(self) -> dict[str, Any]:
        tokenizer = self.tokenizer
        return {
            # openvino_genai gives "" for a special token the model has none of.
            "bos_token": tokenizer.get_bos_token() or None,
            "eos_token": tokenizer.get_eos_token() or None,
            "pad_token": tokenizer.get_pad_token() or None,
            "chat_template": None if self.template.text == FALLBACK_TEMPLATE else self.template.text,
            "tokenizer_class": "openvino_genai.Tokenizer",
        }


def longest_token(tokenizer: Any) -> int | None:
    """The most bytes one token of the vocabulary stands for: a text has at least its length over this many tokens."""
    try:
        return max(map(len, tokenizer.get_vocab())) or None
    except Exception:  # a vocabulary that cannot be listed: no bound from it
        return None
