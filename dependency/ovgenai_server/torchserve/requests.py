"""One LLM-API request, from HTTP (JSON or form) or gRPC (a map of bytes), to the engine and back as text.

The input has one key for the prompt, `text` (a plain prompt, no chat template, as the LLM-API's Hugging Face
handler takes it), and generation parameters under their Hugging Face names. Everything else goes through the
backend's own validation, admission and metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any

import msgspec
from pydantic import ValidationError

from ovgenai_common.body import MAX_JSON_DEPTH, loads
from ovgenai_common.errors import APIError, invalid

from ..api import completions
from ..api.protocol import CompletionRequest
from ..output.stream_runner import text_stream
from ..request.prepared import Prepared
from ..state import ServerState
from .settings import TorchServeSettings

# Hugging Face generation parameter -> the OpenAI field the backend validates.
PARAMETERS = {"max_new_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
              "repetition_penalty": "repetition_penalty", "stop": "stop", "seed": "seed"}
# The backend's field -> this API's, for what the backend refuses: the parameters, and the prompt this API calls text.
OWN_NAMES = {openai: hf for hf, openai in PARAMETERS.items()} | {"prompt": "text"}


def input_value(key: str, text: str) -> Any:
    """A form field's or gRPC input's value: the prompt as it is, a parameter as JSON where it parses as JSON
    (numbers, booleans, lists), else as text."""
    if key == "text":
        return text
    try:  # the body's rules (ovgenai_common/body.py): its depth bounded, no lone surrogate reaches the tokenizer
        return loads(text, MAX_JSON_DEPTH, key)
    except APIError as error:
        if error.code is not None:  # too deep, or JSON that the rules refuse
            raise
        return text  # not JSON at all: the value as text


def from_bytes(values: Mapping[str, bytes]) -> dict[str, Any]:
    """gRPC's input map: each value is UTF-8 text."""
    out: dict[str, Any] = {}
    for key, raw in values.items():
        try:
            out[key] = input_value(key, raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise invalid(f"'{key}' is not UTF-8 text.", key) from error
    return out


def ping_status(state: ServerState) -> str:
    """TorchServe's health word: Healthy once every served model is ready."""
    models = list(state.models)
    return "Healthy" if models and all(model.runtime.health().ready for model in models) else "Unhealthy"


async def prepare(state: ServerState, settings: TorchServeSettings, model_name: str,
                  payload: Mapping[str, Any], client: str = "") -> Prepared:
    """Checked, tokenized and admitted; APIError (400/404/429/503) otherwise."""
    if "inputs_embeds" in payload:
        raise invalid("'inputs_embeds' is not supported: OpenVINO GenAI generates from text or token ids; send "
                      "'text'.", "inputs_embeds")
    text = payload.get("text")
    if not isinstance(text, str) or not text:
        raise invalid("The input needs a non-empty 'text'.", "text")
    unknown = set(payload) - {"text", "do_sample", *PARAMETERS}
    if unknown:
        raise invalid(f"Unknown input keys: {', '.join(sorted(unknown))}.", sorted(unknown)[0])
    if "do_sample" in payload and not isinstance(payload["do_sample"], bool):
        raise invalid("'do_sample' must be true or false.", "do_sample")
    fields = {PARAMETERS[key]: value for key, value in payload.items() if key in PARAMETERS}
    if payload.get("do_sample") is False or ("do_sample" not in payload and "temperature" not in payload):
        fields["temperature"] = 0  # Hugging Face's generate() is greedy unless do_sample is set
    elif payload.get("do_sample") is True and "temperature" not in payload:
        fields["temperature"] = 1.0
    new_tokens = fields.get("max_tokens")
    if isinstance(new_tokens, int) and new_tokens > settings.max_new_tokens:
        raise invalid(f"'max_new_tokens' ({new_tokens}) exceeds MAX_NEW_TOKENS ({settings.max_new_tokens}).",
                      "max_new_tokens")
    try:
        request = CompletionRequest(model=model_name, prompt=text, **fields)
    except ValidationError as error:
        first = error.errors()[0]
        field = OWN_NAMES.get(str(first["loc"][0]), str(first["loc"][0]))
        raise invalid(f"'{field}': {first['msg']}.", field) from error
    try:
        prep = (await completions.prepare(state, request, client))[0]
    except APIError as error:
        if error.param in ("prompt", "max_tokens"):  # the context's limit: past MAX_INPUT_TOKENS is the reason to give
            tokens = await asyncio.to_thread(state.models.named(model_name).prompts.tokenize, text)
            _check_input_tokens(len(tokens), settings)
        raise _in_torchserve_terms(error) from error
    _check_input_tokens(len(prep.prompt_ids), settings)
    if new_tokens is None and prep.params.max_new_tokens > settings.max_new_tokens:
        prep.params = msgspec.structs.replace(prep.params, max_new_tokens=settings.max_new_tokens)
    return prep


def _check_input_tokens(count: int, settings: TorchServeSettings) -> None:
    if count > settings.max_input_tokens:
        raise invalid(f"The input has {count} tokens; MAX_INPUT_TOKENS is {settings.max_input_tokens}.", "text")


def _in_torchserve_terms(error: APIError) -> APIError:
    """The backend's refusal in this API's names: its client sent `max_new_tokens` and `text`, not OpenAI's
    `max_tokens` and `prompt` (the other parameters have the same name in both)."""
    message = re.sub(r"\bmax_tokens\b", "max_new_tokens", error.message).replace("'prompt'", "'text'")
    param = OWN_NAMES.get(error.param, error.param) if error.param else None
    return APIError(error.kind, message, param, error.code, error.status, error.retry_after)


@functools.cache
def model_config_timeout(folder: Path) -> float | None:
    """TorchServe's per-model `responseTimeout`, from the model-config.yaml it keeps beside a model."""
    config = folder / "model-config.yaml"
    if not config.is_file():
        return None
    import yaml

    value = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("responseTimeout")
    return float(value) if value is not None else None


def response_timeout(folder: Path | None, settings: TorchServeSettings) -> float:
    """The model's own responseTimeout if its folder says one, else default_response_timeout."""
    own = model_config_timeout(folder) if folder is not None else None
    return own if own is not None else settings.default_response_timeout


async def generate(state: ServerState, settings: TorchServeSettings, prep: Prepared) -> AsyncGenerator[str, None]:
    """The generated text as it comes, then the end-of-stream token; nothing follows it. A response that would
    pass max_response_size ends there, without it (so the client sees the truncation)."""
    sent = 0
    async with contextlib.aclosing(text_stream(prep, state.metrics)) as stream:  # closing it aborts the generation
        async for text in stream:
            sent += len(text.encode())
            if sent > settings.max_response_size:
                return
            yield text
    yield settings.end_of_stream_token
