"""A model's own generation defaults: the sampling values its makers ship in generation_config.json (Qwen2.5's
temperature 0.7, top_p 0.8, top_k 20, repetition_penalty 1.05), applied under each request's own fields, as vLLM
(`--generation-config auto`) and OVMS apply them. `GENERATION_CONFIG` chooses where they come from: `auto` (the
model's folder), `vllm` or `none` (no defaults but the engine's: greedy only when asked), or a folder of its own."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

FILE = "generation_config.json"
IGNORED = ("vllm", "none")  # vLLM's name for its own defaults, and ours


@dataclass(frozen=True)
class GenerationDefaults:
    """The values a request leaves unset take; None: the engine's own (temperature 1, no top_p, top_k or min_p)."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    max_new_tokens: int | None = None  # a request's max_tokens when it sets none (within the context)

    def shown(self) -> dict[str, Any]:
        """What applies, as /v1/models says it."""
        return {name: value for name, value in asdict(self).items() if value is not None}


def read_generation_defaults(folder: Path | None, choice: str = "auto") -> GenerationDefaults:
    """The defaults `choice` names for a model in `folder` (auto: its own file; a path: that folder's or file)."""
    if choice.lower() in IGNORED:
        return GenerationDefaults()
    source = (folder if choice == "auto" else Path(choice).expanduser())
    if source is None:
        return GenerationDefaults()
    path = source if source.suffix == ".json" else source / FILE
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        if choice != "auto":
            raise ValueError(f"GENERATION_CONFIG names {path}, which does not exist") from None
        return GenerationDefaults()
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read the generation defaults in {path}: {error}") from None
    return _defaults(config, path)


def _defaults(config: dict[str, Any], path: Path) -> GenerationDefaults:
    """Only values the engine can take: a wrong one is the file's mistake, said once and left out."""
    checks = {"temperature": (float, lambda v: 0 <= v <= 2), "top_p": (float, lambda v: 0 < v <= 1),
              "top_k": (int, lambda v: v >= -1), "min_p": (float, lambda v: 0 <= v <= 1),
              "repetition_penalty": (float, lambda v: 0 < v <= 10), "max_new_tokens": (int, lambda v: v >= 1)}
    values: dict[str, Any] = {}
    for name, (kind, valid) in checks.items():
        value = config.get(name)
        if value is None or isinstance(value, bool):
            continue
        if not isinstance(value, int | float) or (kind is int and not float(value).is_integer()) or not valid(value):
            logger.warning("%s: %s %r is not one the engine takes; left out", path, name, value)
            continue
        values[name] = kind(value)
    return GenerationDefaults(**values)
