"""The calls an export makes into transformers, optimum-intel, openvino-tokenizers and OpenVINO, each imported only
when called, and their failures said as ExportError: a model the Hub cannot give, an architecture the exporter does
not support."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import ExportError

VISION_TASK = "image-text-to-text"


def text_task(source: Path) -> str:
    """optimum-intel's task for a checkpoint: a vision-language model (its configuration has a vision tower) reads
    images beside text; any other is a text generator."""
    config = source / "config.json"
    try:
        vision = "vision_config" in json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        vision = False
    return VISION_TASK if vision else "text-generation-with-past"


def is_local(source: str) -> bool:
    return Path(source).expanduser().exists()


def main_export(source: str, output: Path, task: str, ov_config, **kwargs: Any) -> None:
    """optimum-intel's export of a checkpoint to OpenVINO IR (the tokenizer is converted apart)."""
    from optimum.exporters.openvino import main_export as optimum_export

    try:
        optimum_export(source, output, task=task, ov_config=ov_config, convert_tokenizer=False, **kwargs)
    except Exception as error:
        if not is_local(source) and _is_fetch_failure(error):
            raise _fetch_error(source, error) from error
        if isinstance(error, KeyError | ValueError):
            _raise_unsupported(source, error)
        raise


def load_tokenizer(source: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source)
    except Exception as error:
        if _is_fetch_failure(error):
            raise _fetch_error(source, error) from error
        raise


def convert_tokenizer(hf_tokenizer, folder: Path, with_detokenizer: bool = True) -> None:
    """The tokenizer (and detokenizer) as OpenVINO models beside the model, with its files and chat template."""
    import openvino
    from openvino_tokenizers import convert_tokenizer as convert

    converted = convert(hf_tokenizer, with_detokenizer=with_detokenizer)
    tokenizer, detokenizer = converted if with_detokenizer else (converted, None)
    openvino.save_model(tokenizer, str(folder / "openvino_tokenizer.xml"))
    if detokenizer is not None:
        openvino.save_model(detokenizer, str(folder / "openvino_detokenizer.xml"))
    hf_tokenizer.save_pretrained(str(folder))
    template = getattr(hf_tokenizer, "chat_template", None)
    if isinstance(template, str) and template:
        (folder / "chat_template.jinja").write_text(template, encoding="utf-8")


def replace_model(folder: Path, model: Any, stem: str = "openvino_model", compress_to_fp16: bool = True) -> None:
    """Write `model` over the folder's <stem>.xml/.bin (through a staging folder: the .bin is mapped)."""
    import openvino

    staging = folder / ".rewritten"
    staging.mkdir()
    openvino.save_model(model, str(staging / f"{stem}.xml"), compress_to_fp16=compress_to_fp16)
    for name in (f"{stem}.xml", f"{stem}.bin"):
        (staging / name).replace(folder / name)
    staging.rmdir()


def _raised_as(error: BaseException, name: str) -> bool:
    """Whether `error` or one of its causes is huggingface_hub's error class `name` (or a subclass of it)."""
    while error is not None:
        if any(cls.__name__ == name for cls in type(error).__mro__):
            return True
        error = error.__cause__ or error.__context__
    return False


def _fetch_error(source: str, error: Exception) -> ExportError:
    # By the error's class, not its text: the hub's "repository not found" message itself mentions gated repos.
    text = str(error)
    if _raised_as(error, "GatedRepoError"):
        return ExportError(
            f"'{source}' is gated or private: accept its license on the Hugging Face Hub and log in with "
            "`huggingface-cli login` (or set HF_TOKEN), then retry."
        )
    if _raised_as(error, "RepositoryNotFoundError"):
        return ExportError(
            f"Could not fetch '{source}': it is not a local folder, and the Hugging Face Hub has no model of that id "
            "(check the id; a private model needs `huggingface-cli login` or HF_TOKEN)."
        )
    return ExportError(
        f"Could not fetch '{source}': it is neither a local folder nor reachable on the Hugging Face Hub "
        f"(no network, or a wrong id). Details: {text.splitlines()[0] if text else type(error).__name__}"
    )


def _is_fetch_failure(error: BaseException) -> bool:
    """Hub and network failures, whichever HTTP stack huggingface_hub uses underneath."""
    while error is not None:
        module = type(error).__module__.split(".")[0]
        if isinstance(error, OSError) or module in ("httpx", "httpcore", "requests", "urllib3", "huggingface_hub"):
            return True
        error = error.__cause__ or error.__context__
    return False


def _raise_unsupported(source: str, error: Exception) -> None:
    text = str(error).lower()
    if isinstance(error, KeyError) or "architecture" in text or "not supported" in text or "unrecognized" in text:
        raise ExportError(f"'{source}' has an architecture the exporter does not support: {error}") from error
