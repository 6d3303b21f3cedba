"""Preparing a model from whatever the user names, as OVMS's `--source_model` pulls it.

- a Hub repository that holds OpenVINO IR (`openvino_model.xml` at its root, such as the `OpenVINO/*` models) is
  downloaded as it is: no torch, no optimum;
- a GGUF repository gives the one file the user names (GGUF_FILENAME, or a quantization: `owner/name:Q4_K_M`),
  downloaded alone and converted to IR by openvino-genai's own GGUF reader, as a local `.gguf` file is;
- a Transformers checkpoint is downloaded (its weights and tokenizer only) and exported by optimum-intel.

Local files and folders take the same three ways. Downloads land in the Hub's cache (hub.py); the repository gets
its own copy (hard links where the cache shares its file system), because servers mount only the repository.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ovgenai_common.names import EMBEDDING_CONFIG

from . import hub
from .errors import ExportError
from .export import (
    RERANK_WEIGHT_FORMAT,
    TextGenerationOptions,
    _graph_options,
    export_embeddings,
    export_rerank,
    export_text_generation,
    pooling_of,
    require_export_stack,
    staged,
)
from .repository import graph_pbtxt, register
from .sources import ModelReference, parse_reference

Progress = Callable[[str], None]


def pull_text_generation(
    source: str, name: str, repository: Path, options: TextGenerationOptions, overwrite: bool = False,
    revision: str | None = None, gguf_filename: str | None = None, progress: Progress = print,
) -> Path:
    reference = parse_reference(source)
    if reference.local is not None:
        return _local_text_generation(reference.local, name, repository, options, overwrite, gguf_filename, progress)
    listing = _listing(reference, revision)
    if reference.quantization or gguf_filename or listing.kind == "gguf":
        if not listing.ggufs:
            raise ExportError(f"'{reference.repo_id}' holds no GGUF file, so it has no quantization or GGUF file to "
                              f"choose ('{reference.text}', GGUF_FILENAME={gguf_filename or ''}).")
        filename = hub.choose_gguf(listing, gguf_filename, reference.quantization)
        progress(f"{name}: downloading {filename} from {reference.repo_id}")
        gguf = hub.download_file(listing, filename)
        return export_text_generation(str(gguf), name, repository, options, overwrite, progress)
    if listing.kind == "openvino":
        progress(f"{name}: downloading the OpenVINO IR of {reference.repo_id} as it is")
        folder = hub.download_snapshot(listing)
        return install_ir(folder, reference.text, name, repository, overwrite, linked=True,
                          finish=lambda tmp: _write_graph(tmp, options))
    require_export_stack(reference.text)  # before downloading gigabytes it could not convert
    progress(f"{name}: downloading the Transformers checkpoint {reference.repo_id}")
    folder = hub.download_snapshot(listing, listing.checkpoint_ignored())
    return export_text_generation(str(folder), name, repository, options, overwrite, progress,
                                  model_id=reference.repo_id)


def _local_text_generation(local: Path, name: str, repository: Path, options: TextGenerationOptions,
                           overwrite: bool, gguf_filename: str | None, progress: Progress) -> Path:
    if local.is_file():
        if local.suffix != ".gguf":
            raise ExportError(f"'{local}' is a file but no .gguf; give a .gguf file, or a model folder.")
        return export_text_generation(str(local), name, repository, options, overwrite, progress)
    if (local / hub.IR_MODEL).is_file():
        return install_ir(local, str(local), name, repository, overwrite,
                          finish=lambda tmp: _write_graph(tmp, options))
    if not (local / "config.json").is_file() and list(local.glob("*.gguf")):
        files = tuple(p.name for p in local.iterdir())
        chosen = hub.choose_gguf(hub.Listing(str(local), None, files), gguf_filename)
        return export_text_generation(str(local / chosen), name, repository, options, overwrite, progress)
    return export_text_generation(str(local), name, repository, options, overwrite, progress)


def pull_encoder(
    task: str, source: str, name: str, repository: Path, weight_format: str | None, overwrite: bool = False,
    revision: str | None = None, calibration_texts: list[str] | None = None, progress: Progress = print,
) -> Path:
    """An embedding model (`task` "embeddings") or a cross-encoder ("rerank"): OpenVINO IR as it is, anything else
    exported from a local folder (so that its sentence-transformers pooling is read from its own files).
    `weight_format` None: the task's default (export.py)."""
    reference = parse_reference(source)
    if reference.local is not None:
        folder, linked = reference.local, False
    else:
        listing = _listing(reference, revision)
        if listing.kind == "gguf":
            raise ExportError(f"'{reference.repo_id}' holds GGUF files, which serve text generation only; an "
                              f"{task} model must be OpenVINO IR or a Transformers checkpoint.")
        if listing.kind == "transformers" and listing.publishes_encoder_ir:
            progress(f"{name}: downloading the OpenVINO IR {reference.repo_id} publishes ({hub.PUBLISHED_IR}) and "
                     "its tokenizer")
            folder = hub.download_snapshot(listing, allow_patterns=hub.PUBLISHED_IR_PATTERNS)
        else:
            if listing.kind == "transformers":
                require_export_stack(reference.text)
            progress(f"{name}: downloading {reference.repo_id}")
            folder = hub.download_snapshot(listing,
                                           None if listing.kind == "openvino" else listing.checkpoint_ignored())
        linked = True
    finish = (lambda tmp: _describe_embedder(tmp, name)) if task == "embeddings" else None
    if (folder / hub.IR_MODEL).is_file():
        return install_ir(folder, source, name, repository, overwrite, linked=linked, finish=finish, llm=False)
    if (folder / hub.PUBLISHED_IR).is_file():  # the repository's own IR, whatever weight format was asked for
        return install_ir(folder, source, name, repository, overwrite, linked=linked, finish=finish, llm=False,
                          subfolder=hub.PUBLISHED_IR_FOLDER)
    if task == "embeddings":
        return export_embeddings(str(folder), name, repository, weight_format, overwrite, progress,
                                 calibration_texts=calibration_texts)
    return export_rerank(str(folder), name, repository, weight_format or RERANK_WEIGHT_FORMAT, overwrite, progress)


def _listing(reference: ModelReference, revision: str | None) -> hub.Listing:
    hub.use_opea_token()
    return hub.list_files(str(reference.repo_id), revision)


# A checkpoint's other formats, left behind when its published IR is installed from a local folder.
_NOT_IR = ("*.safetensors", "pytorch_model*.bin", "*.onnx", "*.onnx_data", "onnx", "*.h5", "*.msgpack", "*.ot",
           "*.pt", "*.pth", "*.gguf")


def install_ir(folder: Path, source: str, name: str, repository: Path, overwrite: bool, *, linked: bool = False,
               finish: Callable[[Path], None] | None = None, llm: bool = True, subfolder: str | None = None) -> Path:
    """An OpenVINO IR folder into the repository as it is (its tokenizer converted only where it lacks one).
    `subfolder`: where the folder keeps its IR (sentence-transformers' openvino/), moved beside the tokenizer."""
    target = repository / name
    ignored = (".git*", ".cache", *(_NOT_IR if subfolder else ()))
    with staged(target, overwrite) as tmp:
        shutil.copytree(folder, tmp, dirs_exist_ok=True, copy_function=_link_or_copy if linked else shutil.copy2,
                        ignore=shutil.ignore_patterns(*ignored))
        if subfolder:
            for stem in ("openvino_model.xml", "openvino_model.bin"):
                (tmp / subfolder / stem).replace(tmp / stem)  # a rename: a linked file is never written
            shutil.rmtree(tmp / subfolder)
        ensure_tokenizer_ir(tmp, source)
        if finish is not None:
            finish(tmp)
    register(repository / "config.json", name, name, llm=llm, overwrite=True)
    return target


def _link_or_copy(source: str, destination: str) -> None:
    """A hard link to the Hub cache's file where both share a file system (no second copy of gigabytes), else a
    copy. Nothing is ever written into a linked file: files are replaced, never rewritten (see _replace)."""
    try:
        # The cache's snapshot holds symbolic links into its blobs: link the blob itself (link(2) would not follow).
        os.link(os.path.realpath(source), destination)
    except OSError:
        shutil.copy2(source, destination)


def _replace(path: Path) -> Path:
    """Make `path` safe to write: a hard-linked file is unlinked first, so the cache's copy stays as it was."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return path


def ensure_tokenizer_ir(folder: Path, source: str) -> None:
    """openvino-genai needs the tokenizer and detokenizer as IR. A repository that lacks them gets them converted
    from its tokenizer files with openvino-tokenizers, where transformers is installed to read those files."""
    missing = [name for name in hub.TOKENIZER_IRS if not (folder / name).is_file()]
    if not missing:
        return
    try:
        import openvino
        from openvino_tokenizers import convert_tokenizer
        from transformers import AutoTokenizer
    except ImportError as error:
        raise ExportError(
            f"'{source}' holds OpenVINO IR but not {' and '.join(missing)}, and converting its tokenizer needs "
            f"{error.name}, which is not installed here: `pip install 'transformers>=4.45,<5.6'` (no torch needed; "
            "`make run` installs it), or choose a repository that ships its tokenizer as OpenVINO IR (as the "
            "OpenVINO organisation's do)."
        ) from error
    try:
        hf_tokenizer = AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError) as error:
        raise ExportError(f"'{source}' holds OpenVINO IR without {' and '.join(missing)}, and no tokenizer files to "
                          f"convert them from: {error}") from error
    tokenizer, detokenizer = convert_tokenizer(hf_tokenizer, with_detokenizer=True)
    openvino.save_model(tokenizer, str(_replace(folder / "openvino_tokenizer.xml")))
    openvino.save_model(detokenizer, str(_replace(folder / "openvino_detokenizer.xml")))


def _write_graph(folder: Path, options: TextGenerationOptions) -> None:
    """The model's own graph.pbtxt: a repository's graph (for someone else's OVMS layout) is replaced."""
    _replace(folder / "graph.pbtxt").write_text(graph_pbtxt(_graph_options(options, "./")), encoding="utf-8")


def _describe_embedder(folder: Path, name: str) -> None:
    """The embedding service reads pooling and normalization from embedding_config.json; an IR repository has the
    sentence-transformers files they come from (modules.json, 1_Pooling) instead."""
    import json

    if (folder / EMBEDDING_CONFIG).is_file():
        return
    pooling, normalize = pooling_of(folder)
    config = json.loads((folder / "config.json").read_text()) if (folder / "config.json").is_file() else {}
    info = {"name": name, "pooling": pooling, "normalize": normalize,
            "max_length": int(config.get("max_position_embeddings", 512)), "dimensions": config.get("hidden_size"),
            "weight_format": "published", "quant_mode": None}
    _replace(folder / EMBEDDING_CONFIG).write_text(json.dumps(info, indent=2))
