"""The models the backend serves, each as the three parts of the engine seam: its facts (one object, resolved once
when it loads), its prompt builder and its runtime (engine/contract/interface.py); and the registry the routes find them in."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ovgenai_common.errors import APIError, ErrorKind

from ..engine.contract.interface import PromptBuilder, Runtime
from ..tools.calls import TOOL_PARSERS, ToolFormat, detect_tool_format
from .generation_defaults import GenerationDefaults, read_generation_defaults

if TYPE_CHECKING:
    from ..engine.contract.spec import ModelSpec
    from ..settings import BackendSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelFacts:
    """What the request path checks a request against; none of it changes while the model is served."""

    name: str
    max_context: int  # the longest prompt + output accepted
    best_of_limit: int
    max_num_seqs: int  # this model's own batch size (graph.pbtxt may set it per model): admission is sized on it
    prompt_lookup: bool  # served with prompt lookup decoding: every request needs its parameters
    prefix_caching: bool  # a prompt prefix found in the cache is not computed again (so has no log probabilities)
    vision: bool  # a vision-language model: chat messages may carry images, and its prompts are text
    tokenizer_limit: int | None = None  # the tokenizer cuts texts to this many tokens (ovgenai_common/tokens.py)
    vocabulary: int | None = None  # token ids a client may send: 0 .. vocabulary - 1
    longest_token: int | None = None  # the most bytes one token stands for (request/prompts.py bounds a text's count by it)
    supports_tools: bool = False  # the chat template renders `tools`
    tool_format: ToolFormat = "auto"  # the format the model writes tool calls in (tools/calls.py)
    reasoning_parser: str | None = None  # the model's reasoning is split from its answer (tools/reasoning.py)
    source: str = ""  # the IR folder or .gguf file it was loaded from (TorchServe's describe)
    folder: Path | None = None  # the folder holding the model's files and configuration, when it has one
    device: str = "CPU"
    draft_tokens: int = 0  # served with a draft model: the tokens it proposes per step by default; 0: none
    parent: str | None = None  # a LoRA adapter served as a model: the model it adapts (its `source`: the adapter)
    generation: GenerationDefaults = GenerationDefaults()  # what a request's unset sampling fields take


@dataclass(frozen=True)
class ServedModel:
    facts: ModelFacts
    prompts: PromptBuilder
    runtime: Runtime

    @property
    def name(self) -> str:
        return self.facts.name


@dataclass(frozen=True)
class ModelStatus:
    """A model known to the server but not serving (lifecycle.py): being loaded, failed to load, or unloaded while
    idle (the next request loads it again)."""

    state: str  # LOADING, FAILED or UNLOADED
    message: str = ""


class ModelRegistry:
    """The served models by name: what a request's `model` field finds. Models that are loading, failed or asleep
    are kept apart (`statuses`), so a request naming one is told so; `wake` loads an idle one again."""

    def __init__(self, models: dict[str, ServedModel] | None = None):
        self._models = dict(models or {})
        self.statuses: dict[str, ModelStatus] = {}
        self.wake: Callable[[str], Awaitable[None]] | None = None

    def add(self, model: ServedModel) -> None:
        self._models[model.name] = model
        self.statuses.pop(model.name, None)

    def remove(self, name: str) -> ServedModel | None:
        return self._models.pop(name, None)

    async def awake(self, name: str | None) -> None:
        """The model a request names loaded again, when it was unloaded while idle (lifecycle.py)."""
        if name is None and not self._models and len(self.statuses) == 1:
            name = next(iter(self.statuses))
        status = self.statuses.get(name or "")
        if status is not None and status.state == "UNLOADED" and self.wake is not None:
            await self.wake(name or "")

    def __iter__(self) -> Iterator[ServedModel]:
        return iter(list(self._models.values()))

    def __len__(self) -> int:
        return len(self._models)

    def names(self) -> list[str]:
        return list(self._models)

    def runtimes(self) -> list[tuple[str, Runtime]]:
        return [(name, model.runtime) for name, model in self._models.items()]

    def get(self, name: str) -> ServedModel | None:
        return self._models.get(name)

    def named(self, name: str | None) -> ServedModel:
        """The model a request names; a 400 when it names none and several are served, a 404 for an unknown one."""
        served = ", ".join(self._models)
        if not name:
            known = [*self._models, *self.statuses]
            if len(known) != 1:
                raise APIError(ErrorKind.INVALID_REQUEST, f"'model' is required; served models: {served}.", "model")
            name = known[0]
        model = self._models.get(name)
        status = self.statuses.get(name)
        if model is None and status is not None:
            raise APIError(ErrorKind.UNAVAILABLE, f"The model '{name}' is not available: {status.message}.", "model")
        if model is None:
            raise APIError(ErrorKind.NOT_FOUND, f"The model '{name}' does not exist; served models: {served}.",
                           "model", "model_not_found")
        return model


def load_openvino_model(spec: ModelSpec, settings: BackendSettings,
                        on_fatal: Callable[[str], None]) -> ServedModel:
    """A model of `spec` on openvino_genai: its tokenizer and template here, its pipeline in an engine process (not
    yet started: `runtime.start()`). `on_fatal` is told why when the model cannot be loaded at all."""
    from ..engine.api_process.prompt_builder import OpenVINOPromptBuilder
    from ..engine.api_process.runtime import OpenVINORuntime

    max_context = spec.max_context()
    prompts = OpenVINOPromptBuilder(spec.path, spec.folder, max_context, settings.chat_template)
    if prompts.tokenizer_limit is not None:
        logger.warning("the tokenizer of %s cuts texts to their last %d tokens: longer prompts are refused; "
                       "prepare the model again (python -m ovgenai_models) to lift the limit",
                       spec.name, prompts.tokenizer_limit)
    facts = ModelFacts(
        name=spec.name, max_context=max_context, best_of_limit=spec.best_of_limit, max_num_seqs=spec.max_num_seqs,
        prompt_lookup=spec.prompt_lookup, prefix_caching=spec.enable_prefix_caching, vision=spec.vision,
        tokenizer_limit=prompts.tokenizer_limit, vocabulary=prompts.vocabulary, longest_token=prompts.longest_token,
        supports_tools=prompts.template.supports_tools,
        tool_format=TOOL_PARSERS[spec.tool_parser] if spec.tool_parser else detect_tool_format(prompts.template.text),
        reasoning_parser=spec.reasoning_parser, source=str(spec.lora.file if spec.lora else spec.path),
        folder=spec.folder, device=spec.device,
        draft_tokens=spec.num_speculative_tokens if spec.draft_model is not None else 0,
        parent=spec.lora.base if spec.lora else None,
        generation=read_generation_defaults(spec.folder, settings.generation_config),
    )
    runtime = OpenVINORuntime(spec, prompts.tokenizer, settings.log_level, settings.log_format)
    runtime.supervisor.on_fatal = lambda reason: on_fatal(f"{spec.name}: {reason}")
    return ServedModel(facts, prompts, runtime)
