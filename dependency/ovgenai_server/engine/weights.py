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


def compressed_model(folder: Path, cache_dir: Path, weights: str = "int8") -> Path:
    """The folder of an int8- (or int4-) weight copy of the IR model in `folder`, made once and cached."""
    xml = folder / "openvino_model.xml"
    key = hashlib.sha256(f"{xml.resolve()}:{xml.stat().st_mtime_ns}".encode()).hexdigest()[:16]
    target = cache_dir / weights / f"{folder.name}-{key}"
    if (target / "openvino_model.xml").is_file():
        return target
    try:
        import nncf
    except ImportError as error:
        raise RuntimeError(
            "VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS needs NNCF: pip install nncf (or the project's export extra)."
        ) from error
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
