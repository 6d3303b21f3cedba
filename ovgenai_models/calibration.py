"""Texts to calibrate full int8 quantization of an encoder (`embeddings --quant_mode int8`).

Activation ranges are measured on these texts, so they should look like what the model will embed. Without a
file from the user, the built-in corpus is English prose that every Python installation carries offline: the
standard library's docstrings, as whole paragraphs (passages) and as single sentences (queries), in a fixed order.
"""

from __future__ import annotations

import importlib
import random
import re
import warnings
from pathlib import Path

# Modules with plenty of plain-English documentation.
_MODULES = (
    "argparse", "asyncio", "collections", "datetime", "decimal", "email", "functools", "http.client", "itertools",
    "json", "logging", "os", "pathlib", "random", "re", "statistics", "string", "textwrap", "typing", "unittest",
)
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")


def builtin_texts(count: int = 300, seed: int = 0) -> list[str]:
    """`count` texts, half passages (up to ~1,500 characters) and half single sentences."""
    passages = []
    with warnings.catch_warnings():  # some public names are deprecated aliases (typing.io, ...)
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in _MODULES:
            module = importlib.import_module(name)
            for attr in ("", *sorted(a for a in dir(module) if not a.startswith("_"))):
                doc = getattr(getattr(module, attr) if attr else module, "__doc__", None)
                if isinstance(doc, str) and len(text := " ".join(doc.split())) > 40:
                    passages.append(text[:1500])
    passages = sorted(set(passages))
    random.Random(seed).shuffle(passages)
    chosen = passages[: count - count // 2]
    chosen_set = set(chosen)
    # A one-sentence docstring is both a passage and a sentence: each text is taken once.
    sentences = dict.fromkeys(s for text in passages for s in _SENTENCE_END.split(text) if 3 < len(s.split()) < 25)
    return chosen + [s for s in sentences if s not in chosen_set][: count // 2]


def file_texts(path: Path) -> list[str]:
    """One text per non-empty line of a UTF-8 file."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"Cannot read calibration texts from '{path}': {error}") from error
    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        raise ValueError(f"The calibration file '{path}' has no texts (one per line expected).")
    return texts
