"""LoRA adapters served as models of their own (vLLM's `--lora-modules name=path`).

openvino-genai's ContinuousBatchingPipeline applies an adapter given when it is built in the add_request/step loop
only in its static modes: MODE_FUSE adds B·A into the weights as the model is compiled, MODE_STATIC adds the adapter's
matrices to the graph as constants. Its dynamic modes hold the adapter in state that only generate() sets, so the step
loop would answer as the base model (bench/results.md, "LoRA adapters in the step loop"). Each adapter is therefore
an engine of its own, built from its base model's spec with the adapter fused in: fused where the weights are f32,
f16 or bf16, static where they are compressed (int8, int4: openvino-genai fuses no compressed weight).

An adapter is matched to the model's weights by name (its layers' names after PEFT's `base_model.model.` prefix, as
openvino-genai matches them), so it is checked against the IR here: one that matches nothing, or only in part, is
refused at start rather than served as the base model under another name.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, replace
from pathlib import Path

from ovgenai_models.repository import ModelRepositoryError, language_model_xml

from ..engine.contract.spec import LoraAdapter, ModelSpec

ADAPTER_FILE = "adapter_model.safetensors"  # what PEFT's save_pretrained writes
PREFIX = "base_model.model."  # openvino-genai strips it before matching (continuous_batching/pipeline_impl.cpp)
_LAYER = re.compile(r"^(?P<layer>.+)\.lora_[AB](?:\.[^.]+)?\.weight$")
# Weights stored in these types are compressed: openvino-genai cannot fuse an adapter into them.
_LOW_BIT = re.compile(r'element_type="(?:u8|i8|u4|i4|nf4|f4e2m1|u2|u1|f8e4m3|f8e5m2)"')


@dataclass(frozen=True)
class LoraModule:
    name: str  # the model name clients send
    path: Path  # a PEFT adapter folder or its .safetensors file
    base_model_name: str | None = None  # the served model it applies to; None: the only one


def parse_lora_modules(value: object) -> list[LoraModule]:
    """vLLM's forms: `name=path` items (space-separated, or a list), JSON objects `{"name": ..., "path": ...,
    "base_model_name": ...}`, a JSON list of either."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        text = value.strip()
        value = json.loads(text) if text[:1] in "[{" else text.split()
    items = value if isinstance(value, list) else [value]
    return [_module(item) for item in items]


def _module(item: object) -> LoraModule:
    if isinstance(item, LoraModule):
        return item
    if isinstance(item, str) and item.strip().startswith("{"):
        item = json.loads(item)
    if isinstance(item, str):
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"LoRA module '{item}' is not name=path")
        return LoraModule(name, Path(path).expanduser())
    if isinstance(item, dict):
        unknown = sorted(set(item) - {"name", "path", "base_model_name"})
        if unknown or not item.get("name") or not item.get("path"):
            raise ValueError(f"LoRA module {json.dumps(item)}: needs 'name' and 'path' (and optionally "
                             "'base_model_name'), nothing else")
        return LoraModule(str(item["name"]), Path(str(item["path"])).expanduser(), item.get("base_model_name"))
    raise ValueError(f"LoRA module {item!r} is not name=path or a JSON object")


def adapter_file(module: LoraModule) -> Path:
    """The adapter's weights: the folder's adapter_model.safetensors, or the .safetensors file named."""
    path = module.path
    file = path / ADAPTER_FILE if path.is_dir() else path
    if not file.is_file() or file.suffix != ".safetensors":
        raise ModelRepositoryError(f"LoRA adapter '{module.name}': '{path}' is not a PEFT adapter folder (with "
                                   f"{ADAPTER_FILE}) or a .safetensors file.")
    return file


def adapter_layers(file: Path) -> set[str]:
    """The layers an adapter changes, as openvino-genai matches them: its tensors' names read from the safetensors
    header (8 bytes of length, then JSON), without `.lora_A/B.weight` and PEFT's prefix."""
    try:
        with file.open("rb") as stream:
            (length,) = struct.unpack("<Q", stream.read(8))
            header = json.loads(stream.read(length))
    except (OSError, ValueError, struct.error) as error:
        raise ModelRepositoryError(f"'{file}' is not a readable safetensors file: {error}") from None
    layers = {match["layer"] for key in header if (match := _LAYER.match(key))}
    return {layer.removeprefix(PREFIX) for layer in layers}


def check_adapter(module: LoraModule, base: ModelSpec) -> LoraAdapter:
    """The adapter for `base`'s engine, its layers all found among the model's weights; fused unless the weights
    are compressed."""
    file = adapter_file(module)
    what = f"LoRA adapter '{module.name}' for model '{base.name}'"
    if base.path.suffix == ".gguf":
        raise ModelRepositoryError(f"{what}: a .gguf model has no weight names to match an adapter to; serve an "
                                   "OpenVINO IR exported from the Transformers checkpoint the adapter was trained on.")
    if base.vision or base.draft_model is not None:
        raise ModelRepositoryError(f"{what}: adapters are served on text models without a draft model only.")
    layers = adapter_layers(file)
    if not layers:
        raise ModelRepositoryError(f"{what}: '{file}' holds no LoRA tensors (lora_A/lora_B weights).")
    xml = language_model_xml(base.path).read_text(encoding="utf-8", errors="replace")
    names = xml.replace(".", "_")
    missing = sorted(layer for layer in layers if layer not in xml and layer.replace(".", "_") not in names)
    if missing:
        raise ModelRepositoryError(
            f"{what}: {len(missing)} of its {len(layers)} layers match no weight of the model (e.g. "
            f"'{missing[0]}'): it was trained on another model, or the IR lost the weights' names (an IR converted "
            "from a GGUF file has none).")
    compressed = base.enable_quantized_weights or _LOW_BIT.search(xml) is not None
    return LoraAdapter(file, base.name, fuse=not compressed)


def with_adapters(specs: list[ModelSpec], modules: list[LoraModule]) -> list[ModelSpec]:
    """`specs` and, for each adapter, its base model's spec under the adapter's name with the adapter in it."""
    by_name = {spec.name: spec for spec in specs}
    out = list(specs)
    for module in modules:
        if module.name in {spec.name for spec in out}:
            raise ModelRepositoryError(f"LoRA adapter '{module.name}': a model of that name is already served.")
        if module.base_model_name is None and len(specs) != 1:
            raise ModelRepositoryError(f"LoRA adapter '{module.name}': several models are served; name its base with "
                                       '\'{"name": ..., "path": ..., "base_model_name": ...}\'.')
        base = by_name.get(module.base_model_name) if module.base_model_name else specs[0]
        if base is None:
            raise ModelRepositoryError(f"LoRA adapter '{module.name}': no served model is named "
                                       f"'{module.base_model_name}'.")
        out.append(replace(base, name=module.name, lora=check_adapter(module, base)))
    return out
