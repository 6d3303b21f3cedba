"""Exporting models to OpenVINO IR: a GGUF file through openvino-genai's reader, a Hugging Face checkpoint with
optimum-intel and openvino-tokenizers (conversion.py), its weights compressed or quantized with NNCF
(quantization.py); each registered in the repository with its graph.pbtxt or embedding_config.json.

Needs the `export` extra (torch CPU, transformers, optimum-intel, nncf) for checkpoints, imported only when one is
exported; serving needs none of it. Each export writes into a temporary folder beside the target and moves it into
place only when complete, so an interrupted export never leaves a half-written model behind (nor registers one in
config.json).
"""

from __future__ import annotations

import contextlib
import errno
import json
import shutil
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ovgenai_common.names import EMBEDDING_CONFIG, SENTENCE_TRANSFORMERS_CONFIG

from .conversion import VISION_TASK, convert_tokenizer, is_local, load_tokenizer, main_export, replace_model, text_task
from .errors import ExportError, ExportToolsMissing, export_tools_hint
from .quantization import (
    WEIGHT_FORMATS,
    compress_weights,
    export_compressed,
    ov_config,
    quantize_activations,
    weight_quantization,
)
from .repository import graph_pbtxt, make_public, register
from .symmetric_weights import symmetric_weights

TEXT_WEIGHT_FORMATS = ("auto", *WEIGHT_FORMATS)
# Embedding models default to fp16 weights: int8 weights (and OpenVINO's run-time quantization of the activations
# on top) move the vectors measurably further from the original's, fp16 weights barely at all, and where the CPU
# computes bf16 natively fp16 weights in bf16 are also as fast (bench/results.md, "Embeddings"). `--weight-format
# int8` remains the size choice (and probably the faster one on AVX2-only CPUs, where fp16 weights compute in f32);
# `--quant_mode int8` implies it.
EMBEDDING_WEIGHT_FORMAT = "fp16"
# Cross-encoders keep int8 weights as OVMS's export_model.py does (their scores rank; not measured in fp16 here).
RERANK_WEIGHT_FORMAT = "int8"


@dataclass(frozen=True)
class TextGenerationOptions:
    # auto: optimum-intel's per-model int4 default where it has one, else int8 (what `prepare` uses)
    weight_format: str = "auto"
    group_size: int = 128
    ratio: float = 1.0
    sym: bool = False  # int4/int8: symmetric (no zero points), as optimum-cli's --sym
    # Engine options written into graph.pbtxt only when given: an unset one is left to the backend's settings, the
    # one source of engine defaults.
    kv_cache_precision: str | None = None
    enable_prefix_caching: bool | None = None
    cache_size: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    target_device: str | None = None
    prompt_lookup_decoding: bool = False  # plugin_config {"prompt_lookup": true}, as OVMS's export_model.py writes
    tool_parser: str | None = None  # as OVMS's export_model.py writes them
    reasoning_parser: str | None = None


def require_export_stack(source: str) -> None:
    """Converting a Transformers checkpoint needs torch, transformers, optimum-intel and NNCF; serving, OpenVINO IR
    and GGUF models need none of them."""
    try:
        import nncf  # noqa: F401
        import openvino_tokenizers  # noqa: F401
        import optimum.exporters.openvino  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as error:
        raise ExportToolsMissing(
            f"'{source}' is a Transformers checkpoint: converting it to OpenVINO IR needs the conversion tools "
            f"(torch, transformers, optimum-intel, NNCF), which are not installed here ({error.name} is missing). "
            f"{export_tools_hint()} Or choose a model published as OpenVINO IR or GGUF."
        ) from error


def untruncated_tokenizer(folder: Path) -> bool:
    """Rewrite the folder's tokenizer without the cut openvino-genai's GGUF reader builds into it (it keeps the last
    8,192 tokens of every text, whatever the model's context, and silently: a long prompt would lose its system
    prompt). True when there was one."""
    import openvino
    import openvino_tokenizers  # noqa: F401 - registers the tokenizer's operations with OpenVINO

    core = openvino.Core()  # outlives every node of the model: their code is the extension's, which the core holds
    model = core.read_model(str(folder / "openvino_tokenizer.xml"))
    cut = _lift_length_limits(model)
    if cut:
        replace_model(folder, model, "openvino_tokenizer")
    del model
    del core
    return cut


def _lift_length_limits(model: Any) -> bool:
    """The cut is a Minimum of each text's length and a scalar constant: that constant becomes its type's largest."""
    import numpy as np
    import openvino

    cut = False
    for node in model.get_ordered_ops():
        if node.get_type_name() != "Minimum":
            continue
        for port in node.inputs():
            limit = port.get_source_output().get_node()
            if limit.get_type_name() != "Constant" or limit.get_output_partial_shape(0).rank.get_length() != 0:
                continue
            value = limit.get_data()
            if np.issubdtype(value.dtype, np.integer) and value != np.iinfo(value.dtype).max:
                largest = np.array(np.iinfo(value.dtype).max, value.dtype)
                port.replace_source_output(openvino.op.Constant(largest).output(0))
                cut = True
    return cut


@contextmanager
def staged(target: Path, overwrite: bool, needs: int | None = None):
    """Yield a temporary folder; on success it replaces `target`. `needs`: about how many bytes the model takes,
    for the message when the disk fills."""
    if target.exists() and not overwrite:
        raise ExportError(f"'{target}' already exists; pass --overwrite_models to replace it.")
    created = [p for p in [target.parent, *target.parent.parents] if not p.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))

    def clean_up() -> None:
        shutil.rmtree(tmp, ignore_errors=True)
        for folder in created:  # folders made for this export only, innermost first
            with contextlib.suppress(OSError):
                folder.rmdir()

    try:
        yield tmp
        make_public(tmp)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException as error:
        # OpenVINO's writers say a full disk as a RuntimeError of their own: the disk's state is the tell.
        full = getattr(error, "errno", None) == errno.ENOSPC or (isinstance(error, Exception) and _disk_full(tmp))
        clean_up()
        if full:
            raise ExportError(out_of_space(f"writing '{target}'", target.parent, needs)) from error
        raise


def _disk_full(folder: Path, margin: int = 16 * 1024 * 1024) -> bool:
    try:
        return shutil.disk_usage(folder).free < margin
    except OSError:
        return False


def out_of_space(doing: str, where: Path, needs: int | None) -> str:
    """What to tell the user when a write fails with ENOSPC: what was being written, where, how much it needs."""
    free = None
    with contextlib.suppress(OSError):
        free = shutil.disk_usage(next(p for p in (where, *where.parents) if p.exists())).free
    needed = f"about {needs / 1e6:,.0f} MB" if needs else "more room"
    left = f", and {free / 1e6:,.0f} MB are free there" if free is not None else ""
    return (f"The disk ran out of space while {doing}. It needs {needed} on the disk of {where}{left} (after the "
            "failed write was removed). Free some space there, or put the model repository (--model_repository_path; "
            "`make run MODELS=...`) or the Hub's download cache (HF_HOME) on a larger disk, then retry.")


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def gguf_to_ir(source: Path, folder: Path) -> None:
    """Write a GGUF model as OpenVINO IR (model, tokenizer and detokenizer with its chat template) into `folder`.

    Served models are IR, never GGUF: openvino-genai converts a GGUF file at every start (slower than loading its IR)
    and can only open one it may write to, so a GGUF file on a read-only models volume cannot be served. The
    conversion is openvino-genai's own, so the IR decodes exactly as openvino-genai serving the GGUF file does; for
    Q4_1 and Q4_K that is not exactly the file's weights: the reader rounds each group's minimum to an integer zero
    point (docs/models.md, "GGUF files"; what it costs in perplexity: bench/results.md). Q4_0's weights, which the
    reader writes as asymmetric ones, are stored as the symmetric ones they are (symmetric_weights.py)."""
    if not source.is_file():
        raise FileNotFoundError(f"GGUF file '{source}' does not exist.")
    import openvino_genai

    copy = folder / "model.gguf"  # the converter writes its IR beside the file it reads, and must own that file
    shutil.copyfile(source, copy)
    try:
        openvino_genai.LLMPipeline(str(copy), "CPU", enable_save_ov_model=True)
    except RuntimeError as error:
        raise ExportError(f"openvino-genai cannot convert '{source}': {error}") from error
    finally:
        copy.unlink()
    if not (folder / "openvino_model.xml").is_file():
        raise ExportError(f"openvino-genai loaded '{source}' but wrote no OpenVINO IR for it.")
    untruncated_tokenizer(folder)
    symmetric_weights(folder)


def export_text_generation(
    source: str, name: str, repository: Path, options: TextGenerationOptions, overwrite: bool = False,
    progress: Callable[[str], None] = print, model_id: str | None = None,
) -> Path:
    """A .gguf file or a Transformers checkpoint (a folder) as OpenVINO IR in the repository. `model_id`: the Hub
    id the checkpoint was downloaded from, for optimum-intel's per-model quantization defaults."""
    target = repository / name
    if source.endswith(".gguf"):
        progress(f"converting GGUF {source} to OpenVINO IR (weights stay as quantized)")
        with staged(target, overwrite) as tmp:
            gguf_to_ir(Path(source), tmp)
            (tmp / "graph.pbtxt").write_text(graph_pbtxt(_graph_options(options, "./")))
    else:
        require_export_stack(source)
        quantization = weight_quantization(model_id or source, options.weight_format, options.sym,
                                           options.group_size, options.ratio)
        task = text_task(Path(source))
        with staged(target, overwrite) as tmp:
            if quantization is None:
                progress(f"exporting {source} to OpenVINO IR ({options.weight_format})")
                main_export(source, tmp, task, ov_config(options.weight_format))
            else:
                progress(f"exporting {source} to OpenVINO IR with weights compressed by optimum-intel: {quantization}")
                export_compressed(source, tmp, quantization, task)
            progress("converting the tokenizer with openvino-tokenizers")
            convert_tokenizer(load_tokenizer(source), tmp)
            if task == VISION_TASK:
                _write_image_settings(Path(source), tmp)
            (tmp / "graph.pbtxt").write_text(graph_pbtxt(_graph_options(options, "./")))
    register(repository / "config.json", name, name, llm=True, overwrite=True)
    return target


def _write_image_settings(source: Path, folder: Path) -> None:
    """openvino-genai reads a vision-language model's image size and normalization from preprocessor_config.json;
    transformers 5 saves them inside processor_config.json instead, and optimum-intel copies only that."""
    if (source / "preprocessor_config.json").is_file():
        shutil.copyfile(source / "preprocessor_config.json", folder / "preprocessor_config.json")
        return
    try:
        processor = json.loads((source / "processor_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        processor = {}
    if isinstance(processor.get("image_processor"), dict):
        (folder / "preprocessor_config.json").write_text(json.dumps(processor["image_processor"], indent=2),
                                                         encoding="utf-8")


def _graph_options(options: TextGenerationOptions, models_path: str) -> dict[str, Any]:
    return {
        "models_path": models_path,
        "plugin_config": json.dumps({"prompt_lookup": True}) if options.prompt_lookup_decoding else None,
        "enable_prefix_caching": options.enable_prefix_caching,
        "cache_size": options.cache_size,
        "max_num_seqs": options.max_num_seqs,
        "max_num_batched_tokens": options.max_num_batched_tokens,
        "kv_cache_precision": options.kv_cache_precision,
        "device": options.target_device,
        "tool_parser": options.tool_parser,
        "reasoning_parser": options.reasoning_parser,
    }


def pooling_of(source: Path) -> tuple[str, bool]:
    """(pooling, normalize) from a sentence-transformers folder: 1_Pooling/config.json and modules.json."""
    pooling, normalize = "mean", False
    modules_file = source / "modules.json"
    modules = json.loads(modules_file.read_text()) if modules_file.is_file() else []
    for module in modules:
        kind = module.get("type", "")
        if kind.endswith("Normalize"):
            normalize = True
        if kind.endswith("Pooling"):
            config_file = source / module.get("path", "1_Pooling") / "config.json"
            if config_file.is_file():
                config = json.loads(config_file.read_text())
                if config.get("pooling_mode_cls_token"):
                    pooling = "cls"
                elif config.get("pooling_mode_lasttoken"):
                    pooling = "last_token"
    return pooling, normalize


def copy_prompts(source: Path, folder: Path) -> None:
    """sentence-transformers' configuration beside the IR, where the checkpoint has one: the embedding service reads
    the model's prompts from it (optimum's export leaves it behind)."""
    if (source / SENTENCE_TRANSFORMERS_CONFIG).is_file():
        shutil.copyfile(source / SENTENCE_TRANSFORMERS_CONFIG, folder / SENTENCE_TRANSFORMERS_CONFIG)


def _export_encoder(
    source: str, name: str, repository: Path, task: str, pipeline: str, weight_format: str, overwrite: bool,
    progress: Callable[[str], None], finish: Callable[[Path, Any], None] | None = None,
    calibration_texts: list[str] | None = None,
) -> Path:
    """Shared by embeddings and rerank: IR, weight compression or full int8 quantization (when calibration texts
    are given), tokenizer, registration."""
    require_export_stack(source)
    if calibration_texts is not None and weight_format != "int8":
        raise ExportError(f"--quant_mode int8 quantizes the weights to int8 too; it cannot give {weight_format} "
                          "weights (leave out --weight-format).")
    target = repository / name
    with staged(target, overwrite) as tmp:
        progress(f"exporting {source} to OpenVINO IR for {pipeline} ({weight_format})")
        main_export(source, tmp, task, ov_config("fp32" if calibration_texts else weight_format),
                     library_name="transformers")
        hf_tokenizer = load_tokenizer(source)
        if calibration_texts:
            progress(f"quantizing weights and activations to int8 with NNCF ({len(calibration_texts)} texts)")
            quantize_activations(tmp, hf_tokenizer, calibration_texts, _max_length(tmp, hf_tokenizer))
        else:
            compress_weights(tmp, weight_format)
        convert_tokenizer(hf_tokenizer, tmp)
        if finish:
            finish(tmp, hf_tokenizer)
    register(repository / "config.json", name, name, llm=False, overwrite=True)
    return target


def _max_length(folder: Path, hf_tokenizer: Any) -> int:
    """The longest input the exported encoder takes: its tokenizer's limit within its position embeddings."""
    config = json.loads((folder / "config.json").read_text())
    return int(min(getattr(hf_tokenizer, "model_max_length", 512) or 512, config.get("max_position_embeddings", 512)))


def export_embeddings(
    source: str, name: str, repository: Path, weight_format: str | None = None, overwrite: bool = False,
    progress: Callable[[str], None] = print, calibration_texts: list[str] | None = None,
) -> Path:
    """`calibration_texts`: quantize activations to int8 too (full int8), with ranges measured on these texts.
    `weight_format` None: int8 with calibration texts, else EMBEDDING_WEIGHT_FORMAT."""
    weight_format = weight_format or ("int8" if calibration_texts else EMBEDDING_WEIGHT_FORMAT)

    def record_pooling(folder: Path, hf_tokenizer: Any) -> None:
        pooling, normalize = pooling_of(Path(source)) if is_local(source) else ("mean", True)
        if is_local(source):
            copy_prompts(Path(source), folder)
        config = json.loads((folder / "config.json").read_text())
        info = {
            "name": name,
            "pooling": pooling,
            "normalize": normalize,
            "max_length": _max_length(folder, hf_tokenizer),
            "dimensions": config.get("hidden_size"),
            "weight_format": weight_format,
            "quant_mode": "int8" if calibration_texts else None,
        }
        (folder / EMBEDDING_CONFIG).write_text(json.dumps(info, indent=2))

    return _export_encoder(source, name, repository, "feature-extraction", "TextEmbeddingPipeline", weight_format,
                           overwrite, progress, record_pooling, calibration_texts)


def export_rerank(
    source: str, name: str, repository: Path, weight_format: str = RERANK_WEIGHT_FORMAT, overwrite: bool = False,
    progress: Callable[[str], None] = print,
) -> Path:
    return _export_encoder(source, name, repository, "text-classification", "TextRerankPipeline", weight_format,
                           overwrite, progress)
