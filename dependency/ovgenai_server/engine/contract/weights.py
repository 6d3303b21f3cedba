"""The weights a pipeline loads, made once and cached outside the model folder (which may be mounted read-only),
keyed by the source's path and modification time, so only the first start pays:

- VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS: an fp16/fp32 IR's weights compressed to int8 (or int4) with NNCF. A GGUF
  file is already quantized and is loaded as it is.
- A draft model given as a .gguf file, converted to IR: openvino-genai reads a draft from an IR folder only.
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
    return _cache_entry(folder / "openvino_model.xml", cache_dir / weights, folder.name)


def _cache_entry(source: Path, parent: Path, name: str) -> Path:
    key = hashlib.sha256(f"{source.resolve()}:{source.stat().st_mtime_ns}".encode()).hexdigest()[:16]
    return parent / f"{name}-{key}"


def gguf_ir(path: Path, cache_dir: Path) -> Path:
    """The IR folder of the GGUF file `path`, converted by openvino-genai's own reader once and cached."""
    target = _cache_entry(path, cache_dir / "gguf-ir", path.stem)
    if (target / "openvino_model.xml").is_file():
        return target
    from ovgenai_models.export import gguf_to_ir

    logger.info("converting %s to OpenVINO IR (cached in %s)", path, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        gguf_to_ir(path, staging)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


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
