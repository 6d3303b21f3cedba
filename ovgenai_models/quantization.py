"""Weights compressed and activations quantized, with NNCF and optimum-intel's per-model defaults."""

from __future__ import annotations

import gc
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

from .conversion import VISION_TASK, main_export, replace_model
from .errors import ExportError

WEIGHT_FORMATS = ("fp32", "fp16", "int8", "int4")
# Keys of optimum-intel's per-model defaults that need a calibration data set from the Hub (AWQ, scale estimation,
# GPTQ, LoRA correction, data-aware mixed precision): preparation runs offline too, so it takes the data-free part.
_DATA_AWARE = frozenset({"dataset", "num_samples", "quant_method", "scale_estimation", "gptq", "lora_correction",
                         "sensitivity_metric", "statistics_path"})


def ov_config(weight_format: str):
    """What optimum's export itself does: fp16 or fp32 IR (which also stops its size-based auto-int8)."""
    from optimum.intel import OVConfig

    if weight_format not in WEIGHT_FORMATS:
        raise ExportError(f"Unknown weight format '{weight_format}'; choose one of {', '.join(WEIGHT_FORMATS)}.")
    return OVConfig(dtype="fp16" if weight_format == "fp16" else "fp32")


def compress_weights(folder: Path, weight_format: str, group_size: int = 128, ratio: float = 1.0) -> None:
    """int8 / int4 weight compression of an exported IR, with NNCF."""
    if weight_format not in ("int8", "int4"):
        return
    import nncf
    import openvino

    xml = folder / "openvino_model.xml"
    model = openvino.Core().read_model(xml)
    if weight_format == "int8":
        compressed = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
    else:
        compressed = nncf.compress_weights(
            model, mode=nncf.CompressWeightsMode.INT4_ASYM, group_size=group_size, ratio=ratio
        )
    del model
    replace_model(folder, compressed)


def quantize_activations(folder: Path, hf_tokenizer: Any, texts: list[str], max_length: int) -> None:
    """Full int8 (weights and activations) by NNCF post-training quantization, activation ranges from `texts`."""
    import nncf
    import openvino

    model = openvino.Core().read_model(folder / "openvino_model.xml")
    inputs = {port.get_any_name() for port in model.inputs}

    def encode(text: str) -> dict[str, Any]:
        encoded = hf_tokenizer(text, truncation=True, max_length=max_length, return_tensors="np")
        return {key: value for key, value in encoded.items() if key in inputs}

    quantized = nncf.quantize(model, nncf.Dataset(texts, encode), model_type=nncf.ModelType.TRANSFORMER,
                              subset_size=len(texts))
    del model
    replace_model(folder, quantized)


def weight_quantization(model_id: str, weight_format: str, sym: bool = False, group_size: int = 128,
                        ratio: float = 1.0) -> dict[str, Any] | None:
    """optimum-intel's weight quantization for the model: `auto` takes its per-model int4 default where it has one
    (as `optimum-cli export openvino --weight-format int4` does), else its int8 one; int4 and int8 as asked."""
    if weight_format == "auto":
        from optimum.intel.openvino.configuration import get_default_quantization_config

        config = (get_default_quantization_config(model_id, weight_format="int4")
                  or get_default_quantization_config(model_id, weight_format="int8") or {"bits": 8, "sym": False})
    elif weight_format == "int4":
        config = {"bits": 4, "sym": sym, "group_size": group_size, "ratio": ratio}
    elif weight_format == "int8":
        config = {"bits": 8, "sym": sym}
    else:
        return None
    return {key: value for key, value in config.items() if key not in _DATA_AWARE}


def export_compressed(source: str, folder: Path, quantization: dict[str, Any],
                      task: str = "text-generation-with-past") -> None:
    """Export with the weight quantization, written once compressed.

    optimum-intel 2.2's main_export records an OVWeightQuantizationConfig but leaves the weights as they are (its
    CLI compresses in a second step), in the checkpoint's own precision: a bf16 checkpoint is written as bf16 (not
    fp32) into a scratch folder beside the target, compressed by optimum-intel's own model class, and removed."""
    from nncf.errors import InvalidGroupSizeError
    from optimum.intel import OVConfig, OVModelForCausalLM, OVModelForVisualCausalLM, OVWeightQuantizationConfig

    scratch = folder / ".uncompressed"
    config = OVWeightQuantizationConfig(**quantization)
    main_export(source, scratch, task, OVConfig(quantization_config=config))
    model_class = OVModelForVisualCausalLM if task == VISION_TASK else OVModelForCausalLM
    try:
        model = model_class.from_pretrained(scratch, quantization_config=config, compile=False)
    except InvalidGroupSizeError as error:
        raise ExportError(group_size_misfit(quantization.get("group_size"), str(error))) from error
    model.save_pretrained(folder)
    del model
    gc.collect()
    shutil.rmtree(scratch)
    # optimum-intel records the configuration it applied with the scratch folder's path in it: record what was
    # asked instead, so that the model says how its weights were compressed.
    record = folder / "openvino_config.json"
    if record.is_file():
        saved = json.loads(record.read_text(encoding="utf-8"))
        saved["quantization_config"] = quantization
        record.write_text(json.dumps(saved, indent=2), encoding="utf-8")


def group_size_misfit(group_size: int | None, nncf_message: str) -> str:
    """What to do when int4's group size does not divide a layer's input size (NNCF names each such layer with its
    size): the largest group size that divides them all, or int8."""
    sizes = sorted({int(size) for size in re.findall(r"channel size: (\d+)", nncf_message)})
    fitting = math.gcd(*sizes) if sizes else 0
    suggestion = next((g for g in (128, 64, 32, 16) if fitting and fitting % g == 0), None)
    layers = f"its layers with {', '.join(map(str, sizes))} input channels" if sizes else "some of its layers"
    remedy = f"--group_size {suggestion}, or with --weight-format int8" if suggestion else "--weight-format int8"
    return (f"int4 in groups of {group_size} does not fit this model: {layers} cannot be split into groups of "
            f"{group_size}. Export it with {remedy} (per channel).")
