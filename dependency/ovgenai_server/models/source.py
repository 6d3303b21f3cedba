"""Pull and serve, as OVMS's `--source_model X --model_repository_path models` and vLLM's `serve owner/name` do.

The model is prepared as `python -m ovgenai_models prepare` prepares LLM_MODEL_ID (ovgenai_models/prepare.py): a Hub
repository of OpenVINO IR is downloaded as it is, one GGUF file is converted, a Transformers checkpoint is exported
(in the conversion tools' own environment when they are not installed here, handoff.py). A model already prepared
from the same source is served without a download; the server then serves the prepared folder under the source's
name, so clients ask for `model="OpenVINO/Qwen2.5-7B-Instruct-int4-ov"` as they would of OVMS or vLLM.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..settings import BackendSettings

logger = logging.getLogger(__name__)


class SourceError(RuntimeError):
    """The model could not be fetched or prepared; the message says why."""


def source_of(settings: BackendSettings) -> str | None:
    """The model to fetch first: --source_model, or a --model that is a Hub id rather than an existing path."""
    if settings.source_model:
        return settings.source_model
    return _hub_id(settings.model)  # not a Hub id either: the repository loader says the path does not exist


def _hub_id(value: str) -> str | None:
    """`value` when it names a Hub repository rather than an existing path."""
    from ovgenai_models.sources import ModelReferenceError, parse_reference

    if Path(value).expanduser().exists():
        return None
    try:
        return value if parse_reference(value).repo_id else None
    except ModelReferenceError:
        return None


def with_source_prepared(settings: BackendSettings) -> BackendSettings:
    """`settings` serving the prepared source model, and the draft model prepared where a Hub id names it
    (unchanged when there is none to fetch)."""
    draft = _hub_id(str(settings.draft_model)) if settings.draft_model is not None else None
    if draft is not None:  # found in the repository when prepared there already (compose's models service)
        settings = settings.model_copy(update={"draft_model": _prepared(settings, draft, None)})
    source = source_of(settings)
    if source is None:
        return settings
    from ovgenai_models.sources import served_name

    name = served_name(source)
    return settings.model_copy(update={"model": str(_prepared(settings, source, settings.revision)),
                                       "served_model_name": settings.served_model_name or name})


def _prepared(settings: BackendSettings, source: str, revision: str | None) -> Path:
    """The folder `source` is prepared into (at `revision`), in the model repository; one prepared there from the
    same source is used as it is, without the Hub."""
    from ovgenai_models.errors import ExportError
    from ovgenai_models.handoff import prepare_models_with_tools
    from ovgenai_models.prepare import PrepareSettings
    from ovgenai_models.sources import served_name

    repository = (settings.model_repository_path or settings.cache_dir / "models").expanduser()
    logger.info("preparing %s in %s before serving it", source, repository)
    try:
        prepare_models_with_tools(repository, source, revision, PrepareSettings().gguf_filename, "none", None,
                                  "none", None)
    except ExportError as error:
        raise SourceError(str(error)) from error
    return repository / served_name(source)
