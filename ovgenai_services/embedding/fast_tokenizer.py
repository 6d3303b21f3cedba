"""Short texts tokenized by Hugging Face's `tokenizers` over the model folder's tokenizer.json (the tokenizer the
model was trained with, as TEI and sentence-transformers use it) instead of openvino_genai's converted one.

openvino_genai's tokenizer is an OpenVINO inference whose fixed cost is several times a short query's whole
tokenization by `tokenizers`, and the model's next inference runs slower after it; per character `tokenizers` is
several times slower, so it serves calls of at most SHORT_CHARACTERS (bench/results.md). It is used only when it
gives the OpenVINO tokenizer's ids for every probe text, so that a text's tokens (its count, its vector) never
depend on the path.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

SHORT_CHARACTERS = 1024  # where the two tokenizers take about as long
TOKENIZER_JSON = "tokenizer.json"
# Texts whose tokens a converted tokenizer could get wrong: accents and case, scripts without spaces, emoji,
# invisible and full-width characters, special tokens spelled out, runs of spaces, a long word.
PROBE_TEXTS = ("", " ", "what is a lighthouse?", "Héllo Wörld, café NAÏVE ﬁne", "straße İstanbul ǅ",
               "東京は日本の首都です", "Ελληνικά, русский, العربية, हिन्दी", "emoji 😀👍🏽 ok",
               "tabs\tand\nnewlines\r\n  runs   of spaces", "zero\u200bwidth\u00a0nbsp ＦＵＬＬ",
               "[CLS] [SEP] [MASK] [PAD] <s></s> <|endoftext|>", "don't stop-believing!!! ... https://a.b/c?d=e&f",
               "x" * 300)


class FastTokenizer:
    """`tokenizers` over one tokenizer.json: whole texts (no padding or cut of its own), to the arrays the model
    takes."""

    def __init__(self, path: Path):
        import tokenizers

        self._tokenizer = tokenizers.Tokenizer.from_file(str(path))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()

    def encode(self, texts: list[str], pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(token ids, attention mask): int64, one row a text, right-padded with `pad_id` to the longest."""
        # One text at a time, on this thread: encode_batch starts a thread pool, which would take a core from the
        # model and the API process (the OpenVINO tokenizer runs on one thread too) for a short call's few texts.
        rows = [self._tokenizer.encode(text).ids for text in texts]
        width = max(map(len, rows), default=0)
        ids = np.full((len(rows), width), pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, :len(row)] = row
            mask[i, :len(row)] = 1
        return ids, mask


def load_fast_tokenizer(folder: Path, tokenizer: Any) -> FastTokenizer | None:
    """The folder's tokenizer.json where it gives `tokenizer`'s (openvino_genai's) ids for every probe text; None
    where there is none, it does not load, or it disagrees (logged: short texts then take the OpenVINO one)."""
    path = Path(folder) / TOKENIZER_JSON
    if not path.is_file():
        return None
    try:
        fast = FastTokenizer(path)
        for text in PROBE_TEXTS:
            expected = [int(i) for i in tokenizer.encode([text]).input_ids.data[0]]
            got = fast.encode([text])[0][0].tolist()
            if got != expected:
                logger.warning("embedding: %s gives other tokens than the OpenVINO tokenizer for %r (%s, not %s); "
                               "every text takes the OpenVINO tokenizer", path, text, got[:8], expected[:8])
                return None
    except Exception as error:
        logger.warning("embedding: %s does not load (%s); every text takes the OpenVINO tokenizer", path, error)
        return None
    return fast
