"""OpenAI request fields → engine `GenerationParams`, refusing (400, naming the field) what cannot be honoured."""

from __future__ import annotations

import json

from microservices.common.errors import APIError, ErrorKind
from microservices.common.protocol import ChatCompletionRequest, CompletionRequest, SamplingRequest

from .engine.types import GenerationParams

MAX_STOP_STRINGS = 4


def invalid(message: str, param: str | None = None) -> APIError:
    return APIError(ErrorKind.INVALID_REQUEST, message, param)


def reject_unknown_fields(request: SamplingRequest) -> None:
    unknown = request.unknown_fields()
    if unknown:
        raise invalid(f"Unsupported parameter(s): {', '.join(unknown)}.", unknown[0])


def _stop_strings(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else list(stop)
    if len(stops) > MAX_STOP_STRINGS:
        raise invalid(f"'stop' accepts at most {MAX_STOP_STRINGS} strings, got {len(stops)}.", "stop")
    if any(not s for s in stops):
        raise invalid("'stop' strings must not be empty.", "stop")
    return tuple(stops)


def _json_schema(request: SamplingRequest) -> str | None:
    fmt = request.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return json.dumps({"type": "object"})
    schema = (fmt.json_schema or {}).get("schema")
    if not isinstance(schema, dict):
        raise invalid("'response_format.json_schema.schema' must be a JSON schema object.", "response_format")
    return json.dumps(schema)


def build_params(
    request: SamplingRequest,
    *,
    prompt_tokens: int,
    max_context: int,
    best_of_limit: int,
    max_n: int,
    logprobs: int = 0,
) -> GenerationParams:
    max_tokens = request.max_tokens
    if isinstance(request, ChatCompletionRequest) and request.max_completion_tokens is not None:
        max_tokens = request.max_completion_tokens
    if prompt_tokens >= max_context:
        raise invalid(
            f"The prompt has {prompt_tokens} tokens, but this model's context is limited to {max_context} tokens.",
            "messages" if isinstance(request, ChatCompletionRequest) else "prompt",
        )
    room = max_context - prompt_tokens
    if max_tokens is not None and max_tokens > room:
        raise invalid(
            f"max_tokens ({max_tokens}) plus the prompt ({prompt_tokens} tokens) exceeds this model's context "
            f"limit of {max_context} tokens; at most {room} new tokens fit.",
            "max_tokens",
        )
    if request.n > max_n:
        raise invalid(f"'n' must be at most {max_n}, got {request.n}.", "n")
    best_of = request.best_of or request.n
    if best_of < request.n:
        raise invalid(f"'best_of' ({best_of}) must be at least 'n' ({request.n}).", "best_of")
    if best_of > best_of_limit:
        raise invalid(f"'best_of' must be at most {best_of_limit}, got {best_of}.", "best_of")
    temperature = 1.0 if request.temperature is None else request.temperature
    beam = request.best_of is not None and request.best_of > 1
    if beam and request.stream:
        raise invalid("'best_of' > 1 (beam search) cannot be streamed; set stream to false.", "best_of")
    do_sample = temperature > 0 and not beam
    if request.n > 1 and not do_sample and not beam:
        raise invalid(
            "'n' > 1 needs sampling (temperature > 0) or 'best_of' >= n; greedy choices would be identical.", "n"
        )
    if beam and logprobs:
        raise invalid("'logprobs' cannot be combined with 'best_of' > 1.", "logprobs")
    return GenerationParams(
        max_new_tokens=max_tokens if max_tokens is not None else room,
        temperature=temperature,
        do_sample=do_sample,
        top_p=1.0 if request.top_p is None else request.top_p,
        top_k=0 if request.top_k is None or request.top_k < 0 else request.top_k,
        min_p=request.min_p or 0.0,
        seed=request.seed,
        stop=_stop_strings(request.stop),
        presence_penalty=request.presence_penalty or 0.0,
        frequency_penalty=request.frequency_penalty or 0.0,
        repetition_penalty=request.repetition_penalty or 1.0,
        n=request.n,
        num_beams=best_of if beam else 1,
        ignore_eos=request.ignore_eos,
        logprobs=logprobs,
        json_schema=_json_schema(request),
    )


def chat_logprobs(request: ChatCompletionRequest) -> int:
    if request.top_logprobs:
        raise invalid("'top_logprobs' > 0 is not supported by the OpenVINO engine; use logprobs alone.", "top_logprobs")
    return 1 if request.logprobs else 0


def completion_logprobs(request: CompletionRequest) -> int:
    if request.logprobs is None:
        return 0
    if request.logprobs > 0:
        raise invalid(
            "'logprobs' > 0 (alternatives per token) is not supported by the OpenVINO engine; "
            "use logprobs: 0 to get each chosen token's log probability.",
            "logprobs",
        )
    return 1
