"""TorchServe's LLM-API loads MODEL_PATH, a Hugging Face checkpoint folder, with transformers. Such a folder (its
config.json and weights, no openvino_model.xml) is exported to OpenVINO IR here at start, with the export tools
of ovgenai_models (optimum-intel): weights as QUANTIZATION asks (8bit: int8, 4bit: int4) or else in DTYPE's
precision (float32: fp32, otherwise fp16). The IR is kept under the cache folder, keyed by the checkpoint's files
and that choice, so the next start serves it at once; a changed checkpoint is exported again."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

logger = logging.getLogger(__name__)

_WEIGHTS = ("*.safetensors", "pytorch_model*.bin")


def is_checkpoint(path: Path) -> bool:
    """A Transformers checkpoint folder, not OpenVINO IR and not a model repository (whose config.json lists
    models)."""
    config = path / "config.json"
    if not path.is_dir() or not config.is_file() or (path / "openvino_model.xml").is_file():
        return False
    try:
        content = json.loads(config.read_text(encoding="utf-8"))
    except ValueError:
        return False
    if not isinstance(content, dict) or {"mediapipe_config_list", "model_config_list"} & content.keys():
        return False
    return any(next(path.glob(pattern), None) for pattern in _WEIGHTS)


def weight_format(dtype: str, quantization: str) -> str:
    return {"8bit": "int8", "4bit": "int4"}.get(quantization) or ("fp32" if dtype == "float32" else "fp16")


def _key(path: Path, fmt: str) -> str:
    """The checkpoint's identity: where it is, each file's name, size and modification time, the weight format."""
    digest = hashlib.sha256(f"{path.resolve()}\n{fmt}\n".encode())
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(path)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:20]


def exported(path: Path, cache_dir: Path, fmt: str) -> Path:
    """The checkpoint as OpenVINO IR: from the cache, or exported into it now."""
    from ovgenai_models.export import TextGenerationOptions, export_text_generation

    repository = cache_dir / "checkpoints" / _key(path, fmt)
    target = repository / "model"
    if (target / "openvino_model.xml").is_file():
        logger.info("%s: serving its OpenVINO IR exported earlier (%s)", path, target)
        return target
    logger.info("%s is a Transformers checkpoint: exporting it to OpenVINO IR (%s weights) into %s", path, fmt, target)
    export_text_generation(str(path), "model", repository, TextGenerationOptions(weight_format=fmt), overwrite=True,
                           progress=logger.info)
    return target
