"""VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS: compress an fp16/fp32 IR's weights to int8 (or int4) with NNCF at load.

The compressed copy is cached outside the model folder (which may be mounted read-only), keyed by the model's
path and modification time, so only the first start pays for the compression. A GGUF file is already quantized
and is loaded as it is.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)


NNCF_MISSING = (
    "VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS needs NNCF, which this installation does not have: install it (pip install "
    "nncf, or the project's export extra), or serve weights quantized beforehand (python -m ovgenai_models "
    "text_generation --weight-format int8|int4; the models image has the tools)."
)


def _cached_copy(folder: Path, cache_dir: Path, weights: str) -> Path:
    xml = folder / "openvino_model.xml"
    key = hashlib.sha256(f"{xml.resolve()}:{xml.stat().st_mtime_ns}".encode()).hexdigest()[:16]
    return cache_dir / weights / f"{folder.name}-{key}"


def quantization_missing(path: Path, quantize: bool, cache_dir: Path, weights: str = "int8") -> str | None:
    """Why quantized weights cannot be made at load (checked at start, before any model loads), or None."""
    if not quantize or path.suffix == ".gguf" or not (path / "openvino_model.xml").is_file():
        return None
    if (_cached_copy(path, cache_dir, weights) / "openvino_model.xml").is_file():
        return None
    try:
        import nncf  # noqa: F401 - only whether it can be imported
    except ImportError:
        return NNCF_MISSING
    return None


def compressed_model(folder: Path, cache_dir: Path, weights: str = "int8") -> Path:
    """The folder of an int8- (or int4-) weight copy of the IR model in `folder`, made once and cached."""
    xml = folder / "openvino_model.xml"
    target = _cached_copy(folder, cache_dir, weights)
    if (target / "openvino_model.xml").is_file():
        return target
    try:
        import nncf
    except ImportError as error:
        raise RuntimeError(NNCF_MISSING) from error
    import openvino

    logger.info("compressing the weights of %s to %s (cached in %s)", folder, weights, target)
    model = openvino.Core().read_model(xml)
    if weights == "int4":
        compressed = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT4_ASYM, group_size=128)
    else:
        compressed = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        for item in folder.iterdir():  # tokenizer, detokenizer, configs and templates come along unchanged
            if item.is_file() and not item.name.startswith("openvino_model."):
                shutil.copy2(item, staging / item.name)
        openvino.save_model(compressed, str(staging / "openvino_model.xml"))
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def loadable_path(path: Path, quantize: bool, cache_dir: Path, weights: str = "int8") -> Path:
    if not quantize:
        return path
    if path.suffix == ".gguf":
        logger.info("%s is a GGUF model: its weights are already quantized", path)
        return path
    return compressed_model(path, cache_dir, weights)
