"""The Hugging Face Hub, through huggingface_hub's own client, as OVMS's `--source_model` pulls from it.

What a repository holds decides how it is prepared (`Listing.kind`): OpenVINO IR is downloaded as it is, one GGUF
file is downloaded and converted by openvino-genai, a Transformers checkpoint is downloaded and exported. Downloads
go into the Hub's cache (HF_HOME), so a second preparation, another tool or a broken transfer resumes from what is
there; huggingface_hub itself honours HF_TOKEN, HF_ENDPOINT and HF_HUB_OFFLINE. Every failure becomes one
ExportError that says what to do. Nothing here imports torch or optimum.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import ExportError

IR_MODEL = "openvino_model.xml"
TOKENIZER_IRS = ("openvino_tokenizer.xml", "openvino_detokenizer.xml")
# sentence-transformers publishes an encoder's OpenVINO IR in a folder of its own beside the checkpoint (its
# `backend="openvino"` export); the tokenizer, configuration and pooling stay at the root.
PUBLISHED_IR_FOLDER = "openvino"
PUBLISHED_IR = f"{PUBLISHED_IR_FOLDER}/{IR_MODEL}"
# What a download of that IR takes: the IR itself (not its quantized variants) and the small files at the root.
PUBLISHED_IR_PATTERNS = ["*.json", "*.txt", "*.model", "*.jinja", f"{PUBLISHED_IR_FOLDER}/openvino_model.xml",
                         f"{PUBLISHED_IR_FOLDER}/openvino_model.bin"]
# A Transformers checkpoint needs its configuration, weights and tokenizer, never the other formats a repository
# may carry beside them (ONNX, TensorFlow, Flax, GGUF, the original training checkpoint).
CHECKPOINT_IGNORED = ["*.gguf", "*.onnx", "*.onnx_data", "onnx/*", "*.h5", "*.msgpack", "*.ot", "tf_model*",
                      "flax_model*", "original/*", "openvino/*", "*.pt", "*.pth", "*.ckpt", "*.tflite", "coreml/*"]


def use_opea_token() -> None:
    """huggingface_hub reads only HF_TOKEN; OPEA's examples pass the token as HUGGINGFACEHUB_API_TOKEN."""
    if not os.environ.get("HF_TOKEN") and os.environ.get("HUGGINGFACEHUB_API_TOKEN"):
        os.environ["HF_TOKEN"] = os.environ["HUGGINGFACEHUB_API_TOKEN"]


def endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


@dataclass(frozen=True)
class Listing:
    """The files of one revision of a repository."""

    repo_id: str
    revision: str | None
    files: tuple[str, ...]

    @property
    def kind(self) -> str:
        """'openvino' (IR at the root), 'gguf' (GGUF files) or 'transformers' (anything else, to export)."""
        if IR_MODEL in self.files:
            return "openvino"
        return "gguf" if self.ggufs else "transformers"

    @property
    def publishes_encoder_ir(self) -> bool:
        """A sentence-transformers repository with its encoder's IR in openvino/ (used as it is: no torch)."""
        return PUBLISHED_IR in self.files

    @property
    def ggufs(self) -> list[str]:
        # Multimodal projectors (mmproj-*.gguf) are no language model on their own.
        return sorted(f for f in self.files if f.lower().endswith(".gguf")
                      and not Path(f).name.lower().startswith("mmproj"))

    def checkpoint_ignored(self) -> list[str]:
        """What a checkpoint download leaves out: other formats, and PyTorch .bin weights beside safetensors."""
        if any(f.endswith(".safetensors") for f in self.files):
            return [*CHECKPOINT_IGNORED, "pytorch_model*.bin"]
        return CHECKPOINT_IGNORED


def _revision_text(revision: str | None) -> str:
    return f" at revision '{revision}'" if revision else ""


@contextlib.contextmanager
def translated(repo_id: str, revision: str | None = None,
               needs: Callable[[], int | None] | None = None) -> Iterator[None]:
    """huggingface_hub's errors (by class, as its client classifies the Hub's X-Error-Code) as one ExportError each;
    a full disk as what the download needed (`needs`, asked only then) and where."""
    import httpx
    from huggingface_hub import errors

    try:
        yield
    except errors.GatedRepoError as error:
        raise ExportError(
            f"'{repo_id}' is gated or private: accept its license on the Hugging Face Hub with the account whose token "
            "you give, and set HF_TOKEN (or HUGGINGFACEHUB_API_TOKEN; `hf auth login` also works), then retry."
        ) from error
    except errors.RevisionNotFoundError as error:
        raise ExportError(
            f"'{repo_id}' has no revision '{revision}' on {endpoint()}: give a branch, tag or commit of it "
            "(--revision or LLM_MODEL_REVISION / EMBEDDING_MODEL_REVISION / RERANK_MODEL_REVISION)."
        ) from error
    except errors.RepositoryNotFoundError as error:
        raise ExportError(
            f"Could not fetch '{repo_id}': it is not a local folder, and the Hugging Face Hub ({endpoint()}) has no "
            "model of that id (check the id; a private model needs HF_TOKEN)."
        ) from error
    except errors.RemoteEntryNotFoundError as error:
        missing = error.response.url.path.partition("/resolve/")[2].partition("/")[2]
        raise ExportError(f"'{repo_id}'{_revision_text(revision)} has no file '{missing}'.") from error
    except errors.HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else "an error"
        raise ExportError(f"Could not fetch '{repo_id}': the Hub ({endpoint()}) answered {status}: "
                          f"{_first_line(error)}") from error
    except (httpx.HTTPError, errors.OfflineModeIsEnabled, errors.LocalEntryNotFoundError) as error:
        raise ExportError(
            f"Could not fetch '{repo_id}'{_revision_text(revision)}: the Hugging Face Hub ({endpoint()}) cannot be "
            f"reached and the download cache (HF_HOME) does not hold it. Check the network, HF_ENDPOINT or the proxy "
            f"settings. Details: {_root_cause(error)}"
        ) from error
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        raise ExportError(_out_of_space(repo_id, needs)) from error


def cache_folder() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def _out_of_space(repo_id: str, needs: Callable[[], int | None] | None) -> str:
    from .export import out_of_space

    size = None
    with contextlib.suppress(Exception):  # the listing's sizes are a courtesy: the message stands without them
        size = needs() if needs else None
    return out_of_space(f"downloading '{repo_id}' into the Hub's download cache", cache_folder(), size)


def download_size(listing: Listing, allow: list[str] | None = None, ignore: list[str] | None = None) -> int | None:
    """How many bytes the files a download takes add up to, from the Hub's listing with sizes."""
    from huggingface_hub import HfApi
    from huggingface_hub.utils import filter_repo_objects

    wanted = set(filter_repo_objects(listing.files, allow_patterns=allow, ignore_patterns=ignore))
    info = HfApi().model_info(listing.repo_id, revision=listing.revision, files_metadata=True)
    return sum(s.size or 0 for s in info.siblings or () if s.rfilename in wanted) or None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _root_cause(error: BaseException) -> str:
    while (error.__cause__ or error.__context__) is not None:
        error = error.__cause__ or error.__context__
    return _first_line(error)


def list_files(repo_id: str, revision: str | None = None) -> Listing:
    """The repository's files at `revision` (GET /api/models/{repo}/revision/{rev}); offline, those of a snapshot in
    the cache."""
    import httpx
    from huggingface_hub import HfApi, errors

    with translated(repo_id, revision):
        try:
            info = HfApi().model_info(repo_id, revision=revision)
        except (httpx.TransportError, errors.OfflineModeIsEnabled):
            cached = _cached_files(repo_id, revision)
            if cached is None:
                raise
            return Listing(repo_id, revision, cached)
        files = [sibling.rfilename for sibling in info.siblings or ()]
        if not files:  # very large repositories list their files separately
            files = HfApi().list_repo_files(repo_id, revision=revision)
    return Listing(repo_id, revision, tuple(files))


def _cached_files(repo_id: str, revision: str | None) -> tuple[str, ...] | None:
    from huggingface_hub import errors, snapshot_download

    try:
        folder = Path(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except (errors.LocalEntryNotFoundError, OSError):
        return None
    return tuple(sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()))


def download_snapshot(listing: Listing, ignore_patterns: list[str] | None = None,
                      allow_patterns: list[str] | None = None) -> Path:
    """The repository's files (those allowed, but the ignored ones) in the Hub's cache; returns the snapshot
    folder."""
    from huggingface_hub import snapshot_download

    with translated(listing.repo_id, listing.revision,
                    needs=lambda: download_size(listing, allow_patterns, ignore_patterns)):
        return Path(snapshot_download(listing.repo_id, revision=listing.revision, ignore_patterns=ignore_patterns,
                                      allow_patterns=allow_patterns))


def download_file(listing: Listing, filename: str) -> Path:
    from huggingface_hub import hf_hub_download

    with translated(listing.repo_id, listing.revision, needs=lambda: download_size(listing, [filename])):
        return Path(hf_hub_download(listing.repo_id, filename, revision=listing.revision))


def _tag_pattern(quantization: str) -> re.Pattern[str]:
    """A quantization tag as a whole part of a file name: Q4_K matches '...-Q4_K.gguf', not '...-Q4_K_M.gguf'."""
    return re.compile(rf"(?:^|[-._]){re.escape(quantization)}(?:[-.]|$)", re.IGNORECASE)


_SPLIT = re.compile(r"-\d{5}-of-\d{5}$")


def _stem(filename: str) -> str:
    return Path(filename).name[: -len(".gguf")]


def choose_gguf(listing: Listing, filename: str | None = None, quantization: str | None = None) -> str:
    """The one GGUF file to serve: the one named (GGUF_FILENAME, OVMS's --gguf_filename), the one of the named
    quantization (llama.cpp's owner/name:Q4_K_M), or the repository's only one. Anything else is an error that
    lists the choices."""
    ggufs = listing.ggufs
    choices = ", ".join(ggufs) if ggufs else "none"
    if filename:
        if filename not in listing.files:
            raise ExportError(f"'{listing.repo_id}'{_revision_text(listing.revision)} has no file '{filename}' "
                              f"(GGUF_FILENAME); its GGUF files: {choices}.")
        chosen = [filename]
    elif quantization:
        pattern = _tag_pattern(quantization)
        chosen = [f for f in ggufs if pattern.search(_stem(f))]
        if not chosen:
            raise ExportError(f"'{listing.repo_id}' has no GGUF file of quantization '{quantization}'; "
                              f"its GGUF files: {choices}.")
    else:
        chosen = ggufs
    split = {_SPLIT.sub("", _stem(f)) for f in chosen if _SPLIT.search(_stem(f))}
    if len(split) == 1 and all(_SPLIT.search(_stem(f)) for f in chosen):
        raise ExportError(f"'{listing.repo_id}' splits {chosen[0]} into several files, which openvino-genai's GGUF "
                          f"reader cannot load; choose a quantization kept in one file. Its GGUF files: {choices}.")
    if len(chosen) > 1:
        raise ExportError(
            f"'{listing.repo_id}' holds several GGUF files{' of that quantization' if quantization else ''}: "
            f"{', '.join(chosen)}. Name one with GGUF_FILENAME (or --gguf_filename), or a quantization as "
            f"'{listing.repo_id}:Q4_K_M'."
        )
    return chosen[0]
