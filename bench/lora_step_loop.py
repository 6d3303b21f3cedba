"""Does a LoRA adapter given to openvino-genai's ContinuousBatchingPipeline when it is built change what the
add_request/step loop generates (the loop the backend runs), in each AdapterConfig mode? (bench/results.md, "LoRA
adapters in the step loop".)

A tiny random Llama (tests/support/tiny_models.py, with Hugging Face weight names) is exported to f32 IR and given a
PEFT adapter on q_proj and v_proj; one fixed prompt is answered greedily by the base model, by generate() with the
adapter, and by the step loop of a pipeline built with the adapter in each mode; then the static modes on the
same model's int8 weights and on the default model. Needs the export tools (torch,
transformers, optimum-intel: `make export-tools`, or .venv after `make test`).

    python bench/lora_step_loop.py [--json bench/results/lora_step_loop.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ovgenai_common.cpu import cpu_flags  # noqa: E402

PROMPT = "paris is the capital of"
NEW_TOKENS = 16
F32 = {"INFERENCE_PRECISION_HINT": "f32"}
DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


def build(root: Path) -> tuple[Path, Path]:
    """The tiny model as f32 IR (with its tokenizer) and its adapter folder."""
    from ovgenai_models.export import TextGenerationOptions, export_text_generation
    from tests.support.tiny_models import build_tiny_llama, write_tiny_lora

    checkpoint = build_tiny_llama(root / "checkpoint")
    ir = export_text_generation(str(checkpoint), "tiny", root / "repository",
                                TextGenerationOptions(weight_format="fp32"), progress=lambda _: None)
    return ir, write_tiny_lora(root / "adapter", checkpoint)


def _config(adapters=None):
    import openvino_genai

    config = openvino_genai.GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False)
    config.ignore_eos = True
    if adapters is not None:
        config.adapters = adapters
    return config


def _pipeline(ir: Path, adapters=None):
    import openvino_genai

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_size = 1
    properties = dict(F32) | ({"adapters": adapters} if adapters is not None else {})
    return openvino_genai.ContinuousBatchingPipeline(str(ir), scheduler, "CPU", properties)


def step_loop(pipeline, ids, config) -> list[int]:
    """One request through add_request/step, as the backend's engine loop drives it."""
    import openvino as ov

    handle = pipeline.add_request(0, ov.Tensor(ids), config)
    tokens: list[int] = []
    while pipeline.has_non_finished_requests():
        pipeline.step()
        while handle.can_read():
            for output in handle.read().values():
                tokens.extend(output.generated_ids)
    return tokens


def measure(ir: Path, adapter_dir: Path) -> dict[str, list[int] | str]:
    import numpy as np
    import openvino as ov
    import openvino_genai

    adapter = openvino_genai.Adapter(str(adapter_dir / "adapter_model.safetensors"))
    ids = np.array([openvino_genai.Tokenizer(str(ir)).encode(PROMPT).input_ids.data[0]], dtype=np.int64)
    modes = openvino_genai.AdapterConfig.Mode
    results: dict[str, list[int] | str] = {"base, step loop": step_loop(_pipeline(ir), ids, _config())}
    llm = openvino_genai.LLMPipeline(str(ir), "CPU", adapters=openvino_genai.AdapterConfig(adapter), **F32)
    results["LLMPipeline.generate() with the adapter"] = list(
        llm.generate(ov.Tensor(ids), _config(openvino_genai.AdapterConfig(adapter))).tokens[0])
    for name in ("MODE_AUTO", "MODE_DYNAMIC", "MODE_STATIC_RANK", "MODE_STATIC", "MODE_FUSE"):
        try:
            pipeline = _pipeline(ir, openvino_genai.AdapterConfig(adapter, getattr(modes, name)))
        except Exception as error:  # a mode that does not build says why
            results[f"{name}: built"] = f"refused: {str(error).splitlines()[0][:160]}"
            continue
        results[f"{name}: step loop"] = step_loop(pipeline, ids, _config())
        results[f"{name}: step loop, adapter in the request"] = step_loop(
            pipeline, ids, _config(openvino_genai.AdapterConfig(adapter, getattr(modes, name))))
        request = _config(openvino_genai.AdapterConfig(adapter, getattr(modes, name)))
        results[f"{name}: generate() with the adapter"] = _generate(pipeline, ids, request)
        results[f"{name}: step loop after generate()"] = step_loop(pipeline, ids, _config())
    return results


def other_weights(work: Path, adapter_dir: Path, default_model: Path) -> dict[str, list[int] | str]:
    """The static modes on int8 weights of the same model, and on the default model (an IR converted from a GGUF,
    whose weights carry no Hugging Face names)."""
    import numpy as np
    import openvino_genai

    from ovgenai_models.export import TextGenerationOptions, export_text_generation

    int8 = work / "repository" / "tiny-int8"
    if not int8.exists():
        export_text_generation(str(work / "checkpoint"), "tiny-int8", work / "repository",
                               TextGenerationOptions(weight_format="int8"), progress=lambda _: None)
    adapter = openvino_genai.Adapter(str(adapter_dir / "adapter_model.safetensors"))
    results: dict[str, list[int] | str] = {}
    for label, ir in (("int8 IR", int8), ("default model (from GGUF)", default_model)):
        if not ir.exists():
            continue
        ids = np.array([openvino_genai.Tokenizer(str(ir)).encode(PROMPT).input_ids.data[0]], dtype=np.int64)
        results[f"{label}: base, step loop"] = step_loop(_pipeline(ir), ids, _config())
        for name in ("MODE_STATIC", "MODE_FUSE"):
            mode = getattr(openvino_genai.AdapterConfig.Mode, name)
            try:
                pipeline = _pipeline(ir, openvino_genai.AdapterConfig(adapter, mode))
                results[f"{label}: {name}, step loop"] = step_loop(pipeline, ids, _config())
            except Exception as error:
                lines = str(error).splitlines()
                reason = next((line for line in lines if "decompression" in line), lines[0])
                results[f"{label}: {name}"] = f"refused: {reason.strip()[:200]}"
    return results


def _generate(pipeline, ids, config) -> list[int]:
    import openvino as ov

    return list(pipeline.generate([ov.Tensor(ids)], [config])[0].m_generation_ids[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="write the outputs here too")
    parser.add_argument("--work", type=Path,
                        help="build the model and adapter here, or reuse them (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        if (work / "adapter").exists():
            ir, adapter = work / "repository" / "tiny", work / "adapter"
        else:
            ir, adapter = build(work)
        results = measure(ir, adapter)
        others = other_weights(ir.parent.parent, adapter, Path(__file__).parents[1] / "models" / DEFAULT_MODEL)
    base = results["base, step loop"]
    reference = results["LLMPipeline.generate() with the adapter"]
    for name, tokens in results.items():
        verdict = "" if isinstance(tokens, str) else (
            " = base" if tokens == base else " = generate() with the adapter" if tokens == reference else " other")
        print(f"{name:52} {tokens}{verdict}")
    for name, tokens in others.items():
        print(f"{name:52} {tokens}")
    if args.json:
        model, *flags = cpu_flags() or ["unknown"]
        args.json.write_text(json.dumps({"cpu": {"model": model, "cpus": os.cpu_count(), "flags": flags},
                                         "prompt": PROMPT, "new_tokens": NEW_TOKENS, "outputs": results,
                                         "other_weights": others}, indent=1))


if __name__ == "__main__":
    main()
