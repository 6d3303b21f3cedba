"""What a model reference names, and the name its model is served under.

A reference is what users write in LLM_MODEL_ID, EMBEDDING_MODEL_ID, RERANK_MODEL_ID or `--source_model`:

- an existing file or folder: a `.gguf` file, an OpenVINO IR folder, or a Transformers checkpoint;
- a Hugging Face Hub id, `owner/name`, optionally with one GGUF quantization as llama.cpp's `-hf` takes it
  (`owner/name:Q4_K_M`).

The served name is the reference itself for a Hub id (quantization included, so that every service configured
with the same variable asks for the same name) and the file or folder name for a local path. Nothing here
imports more than the standard library: serving and the download paths use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .errors import ExportError

# The Hub's repository names: letters, digits, '-', '_', '.', one optional owner.
_REPO_ID = re.compile(r"^(?:[\w.-]+/)?[\w.-]+$")
# A GGUF quantization tag as llama.cpp's `owner/name:TAG` takes it (Q4_K_M, q8_0, IQ2_XS, F16, BF16, ...).
_QUANTIZATION = re.compile(r"^[\w.-]+$")


class ModelReferenceError(ExportError):
    """A model reference that names neither an existing path nor a Hub repository."""


@dataclass(frozen=True)
class ModelReference:
    text: str
    local: Path | None = None  # an existing file or folder
    repo_id: str | None = None  # a Hub repository
    quantization: str | None = None  # one GGUF quantization of a Hub repository

    @property
    def served_name(self) -> str:
        if self.local is not None:
            return self.local.stem if self.local.suffix == ".gguf" else self.local.resolve().name
        return f"{self.repo_id}:{self.quantization}" if self.quantization else str(self.repo_id)


def parse_reference(text: str) -> ModelReference:
    text = text.strip()
    path = Path(text).expanduser()
    if text and path.exists():
        return ModelReference(text, local=path)
    if text.startswith((".", "/", "~")) or text.endswith(".gguf"):
        raise ModelReferenceError(f"'{text}' does not exist (a local model must be an existing file or folder).")
    repo_id, _, quantization = text.strip("/").partition(":")
    valid_quantization = not quantization or _QUANTIZATION.match(quantization)
    if not _REPO_ID.match(repo_id) or repo_id.count("/") > 1 or not valid_quantization:
        raise ModelReferenceError(
            f"'{text}' is neither an existing file or folder nor a Hugging Face model id such as "
            "'owner/name' (or 'owner/name:Q4_K_M' for one quantization of a GGUF repository)."
        )
    return ModelReference(text, repo_id=repo_id, quantization=quantization or None)


def served_name(text: str) -> str:
    """The name a model reference is served under (see the module's docstring)."""
    return parse_reference(text).served_name
