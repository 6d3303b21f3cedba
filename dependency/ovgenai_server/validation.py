"""Requests in, `Prepared` out: every check between an OpenAI request and the engine's `GenerationParams` (the
model, the fields, the prompt and its token ids, the chat template, admission), refusing with a 400 that names the
field what cannot be honoured."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import msgspec

from ovgenai_common.body import MAX_JSON_DEPTH, loads
from ovgenai_common.errors import MAX_RETRY_AFTER, APIError, ErrorKind, library_reason
from ovgenai_common.protocol import (
    FLOAT32_SMALLEST_NORMAL,
    ChatCompletionRequest,
    ChatMessage,
    CompletionRequest,
    OpenAIModel,
    SamplingRequest,
    TextPart,
)
from ovgenai_common.tokens import check_token_ids

from .chat_output import OutputPlan
from .engine.types import PROMPT_LOOKUP_DEFAULTS, Engine, GenerationParams, RequestOutput, StructuredOutput
from .images import Image, ImageRef, decode_image, image_refs, image_tag
from .reasoning import starts_inside
from .settings import BackendSettings
from .tool_choice import plan_tools, template_variables

MAX_STOP_STRINGS = 4
# The engine matches every stop string against the tail of the text after each token: bound the work per token.
MAX_STOP_LENGTH = 512
TOP_K_EVERY_TOKEN = 2**31 - 1  # more than any vocabulary
# A temperature below this decodes greedily, as vLLM's does: dividing logits by less cannot change which token is
# likeliest, and the engine's 32-bit float turns a temperature below ~1e-38 into a denormal (random tokens) or zero.
SAMPLING_EPSILON = 1e-5
MIN_P_LARGEST = 1 - 2**-24  # the largest float32 below 1
KV_BLOCK_TOKENS = 32  # the CPU plugin's KV block (engine/kv_cache.py)


def invalid(message: str, param: str | None = None) -> APIError:
    return APIError(ErrorKind.INVALID_REQUEST, message, param)


def rendered(engine: Engine, messages: list[dict], tools: list[dict] | None, add_generation_prompt: bool,
             variables: dict[str, Any] | None, continue_final_message: bool = False) -> str:
    """The conversation through the model's chat template; a 400 with the template's own reason where it refuses
    (its `raise_exception`, or the library's, without the library's source paths).

    A last assistant message without a generation prompt (or with vLLM's `continue_final_message`) is continued:
    the text is cut right after that message's content, so the template's end of turn after it goes (as
    transformers' and vLLM's continue_final_message cut it); it was rendered closed, and the model began a new
    turn."""
    if continue_final_message and add_generation_prompt:
        raise invalid("'continue_final_message' continues the last message: it cannot be combined with "
                      "'add_generation_prompt' true.", "continue_final_message")
    continuing = not add_generation_prompt and messages[-1]["role"] == "assistant"
    if continue_final_message and not continuing:
        raise invalid("'continue_final_message' needs the last message to be the assistant's.",
                      "continue_final_message")
    try:
        text = engine.apply_chat_template(messages, tools, add_generation_prompt, variables)
    except Exception as error:  # the template itself refused the conversation
        raise invalid(f"The chat template rejected the messages: {library_reason(error)}", "messages") from error
    content = messages[-1].get("content")
    if not continuing or not isinstance(content, str) or not content.strip():
        return text
    for shown in (content, content.strip()):  # templates that trim the content show it stripped
        if (at := text.rfind(shown)) >= 0:
            return text[: at + len(shown)]
    raise invalid("The chat template does not show the last assistant message as it was sent, so it cannot be "
                  "continued.", "messages")


def tokenized(engine: Engine, text: str, param: str, add_special_tokens: bool = True) -> list[int]:
    """`text`'s token ids, whole: a text that reaches a limit the tokenizer cuts at is refused, never served cut."""
    ids = engine.tokenize(text, add_special_tokens=add_special_tokens)
    if engine.tokenizer_limit is not None and len(ids) >= engine.tokenizer_limit:
        raise invalid(
            f"The text has at least {engine.tokenizer_limit} tokens, the most this model's tokenizer counts (it "
            "drops the beginning of longer texts); shorten it, or prepare the model again with "
            "`python -m ovgenai_models` to lift the limit.", param,
        )
    return ids


def reject_unknown_fields(request: OpenAIModel) -> None:
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
    if any(len(s) > MAX_STOP_LENGTH for s in stops):
        raise invalid(f"'stop' strings may be at most {MAX_STOP_LENGTH} characters long.", "stop")
    return tuple(stops)


def _structured_output(request: SamplingRequest) -> StructuredOutput | None:
    """The one grammar the request constrains its output with (`response_format`, vLLM's `structured_outputs` or
    its older `guided_*` fields); whether the compiler takes it is checked before admission (`Serving.prepare_*`,
    engine/grammar.py)."""
    constraints = [c for c in (_response_format(request), *_vllm_constraints(request)) if c is not None]
    if len(constraints) > 1:
        named = " and ".join(f"'{c.param}'" for c in constraints)
        raise invalid(f"Only one output constraint may be set per request; got {named}.", constraints[1].param)
    return constraints[0] if constraints else None


def _response_format(request: SamplingRequest) -> StructuredOutput | None:
    fmt = request.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return StructuredOutput("json_schema", json.dumps({"type": "object"}))
    schema = (fmt.json_schema or {}).get("schema")
    if not isinstance(schema, dict):
        raise invalid("'response_format.json_schema.schema' must be a JSON schema object.", "response_format")
    return StructuredOutput("json_schema", json.dumps(schema))


def _vllm_constraints(request: SamplingRequest) -> list[StructuredOutput]:
    """Each of vLLM's constraint fields that is set, as the grammar openvino_genai runs it."""
    found = _constraints(
        "guided_", request.guided_json, request.guided_regex, request.guided_choice, request.guided_grammar
    )
    nested = request.structured_outputs
    if nested is not None:
        inner = _constraints("structured_outputs.", nested.json_schema, nested.regex, nested.choice, nested.grammar)
        if not inner:
            raise invalid("'structured_outputs' must set one of json, regex, choice or grammar.", "structured_outputs")
        found += inner
    return found


def _constraints(
    prefix: str, schema: dict[str, Any] | str | None, regex: str | None, choice: list[str] | None, grammar: str | None
) -> list[StructuredOutput]:
    found = []
    if schema is not None:
        found.append(StructuredOutput("json_schema", _schema_text(schema, prefix + "json"), prefix + "json"))
    if regex is not None:
        found.append(StructuredOutput("regex", regex, prefix + "regex"))
    if choice is not None:
        found.append(StructuredOutput("grammar", choice_grammar(choice, prefix + "choice"), prefix + "choice"))
    if grammar is not None:
        found.append(StructuredOutput("grammar", grammar, prefix + "grammar"))
    return found


def _schema_text(schema: dict[str, Any] | str, param: str) -> str:
    """A JSON schema given as an object or as its JSON text (vLLM takes both), as JSON text."""
    if isinstance(schema, str):  # parsed by the body's rules: its depth bounded, and JSON only (ovgenai_common/body.py)
        try:
            schema = loads(schema, MAX_JSON_DEPTH, param)
        except APIError as error:
            raise invalid(f"'{param}' must be a JSON schema object or its JSON text: {error.message}", param) from None
    if not isinstance(schema, dict):
        raise invalid(f"'{param}' must be a JSON schema object or its JSON text.", param)
    return json.dumps(schema)


def choice_grammar(choices: list[str], param: str) -> str:
    """An EBNF grammar whose only sentences are the choices (as vLLM's xgrammar backend builds one): each choice is
    a string literal, written with JSON's escapes, which the EBNF parser reads the same way."""
    if not choices:
        raise invalid(f"'{param}' must list at least one string.", param)
    return "root ::= " + " | ".join(json.dumps(choice, ensure_ascii=False) for choice in choices)


def build_params(
    request: SamplingRequest,
    *,
    prompt_tokens: int,
    max_context: int,
    best_of_limit: int,
    max_n: int,
    logprobs: int = 0,
    prompt_lookup: bool = False,
    forced: StructuredOutput | None = None,
    kv_cache_tokens: int | None = None,
) -> GenerationParams:
    """The engine's parameters for an admitted request; a 400 naming the field for a combination it cannot run.
    `forced` is the grammar a tool_choice forces a call with (tool_choice.py); `kv_cache_tokens` what the engine's
    KV cache holds, when it is fixed."""
    max_new_tokens = _new_token_budget(request, prompt_tokens, max_context)
    best_of = _checked_choices(request, best_of_limit, max_n)
    temperature = 1.0 if request.temperature is None else request.temperature
    if temperature < SAMPLING_EPSILON:
        temperature = 0.0
    beam = request.best_of is not None and request.best_of > 1
    if kv_cache_tokens:
        sequences = best_of if beam else 1  # n sampled choices run as n requests of one sequence (engine/client.py)
        max_new_tokens = _kv_cache_budget(request, prompt_tokens, max_new_tokens, sequences, kv_cache_tokens)
    _check_search(request, temperature, beam, logprobs)
    num_assistant_tokens, max_ngram_size = _prompt_lookup(request, prompt_lookup, beam)
    structured_output = _structured_output(request)
    if forced is not None and structured_output is not None:
        raise invalid(f"'tool_choice' forces a tool call, which cannot be combined with '{structured_output.param}'.",
                      "tool_choice")
    structured_output = structured_output or forced
    if structured_output is not None:
        _check_constrained_search(request, best_of, structured_output.param)
    return GenerationParams(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        do_sample=temperature > 0 and not beam,
        # The nucleus of any smaller top_p is the likeliest token alone, as it is for the smallest the engine holds.
        top_p=1.0 if request.top_p is None else max(request.top_p, FLOAT32_SMALLEST_NORMAL),
        # Past the vocabulary, top_k keeps every token, as no top_k does: any larger value means the same, and must
        # still fit the engine's integer.
        top_k=0 if request.top_k is None or request.top_k < 0 else min(request.top_k, TOP_K_EVERY_TOKEN),
        # The engine takes min_p below 1 only; 1 keeps the likeliest token (and its ties), as the largest float32
        # below 1 does.
        min_p=min(request.min_p or 0.0, MIN_P_LARGEST),
        seed=None if request.seed is None else request.seed % 2**64,
        stop=_stop_strings(request.stop),
        presence_penalty=request.presence_penalty or 0.0,
        frequency_penalty=request.frequency_penalty or 0.0,
        repetition_penalty=request.repetition_penalty or 1.0,
        n=request.n,
        num_beams=best_of if beam else 1,
        ignore_eos=request.ignore_eos,
        logprobs=logprobs,
        structured_output=structured_output,
        num_assistant_tokens=num_assistant_tokens,
        max_ngram_size=max_ngram_size,
    )


def _new_token_budget(request: SamplingRequest, prompt_tokens: int, max_context: int) -> int:
    """max_tokens (or max_completion_tokens) when it fits beside the prompt, else the room the context leaves."""
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
    return max_tokens if max_tokens is not None else room


def _kv_cache_budget(request: SamplingRequest, prompt_tokens: int, max_new_tokens: int, sequences: int,
                     kv_cache_tokens: int) -> int:
    """The new tokens per sequence that fit the KV cache with all of the request's sequences at their longest.

    openvino_genai runs a request's sequences (one, or a beam search's beams) as one group, preempted and computed
    again as one: a group that can outgrow the whole cache never finishes, and its steps go round for as long as it
    stays, taking the cache from every other request, or, when nothing else can be scheduled, failing them all with
    "does not fit". So such a request is refused here, before it runs. A max_tokens left unset is cut to what fits."""
    # In blocks: the prompt's whole blocks are shared by the group's sequences, and from its last, partial one on
    # each sequence has blocks of its own.
    shared = prompt_tokens // KV_BLOCK_TOKENS
    own = (kv_cache_tokens // KV_BLOCK_TOKENS - shared) // sequences
    per_sequence = (shared + own) * KV_BLOCK_TOKENS - prompt_tokens
    if max_new_tokens <= per_sequence:
        return max_new_tokens
    explicit = request.max_tokens is not None or (
        isinstance(request, ChatCompletionRequest) and request.max_completion_tokens is not None)
    if per_sequence >= 1 and not explicit:
        return per_sequence
    field = "best_of" if sequences > 1 else "max_tokens" if per_sequence >= 1 else \
        "messages" if isinstance(request, ChatCompletionRequest) else "prompt"
    raise invalid(
        f"The prompt ({prompt_tokens} tokens) and {sequences} sequence(s) of up to {max_new_tokens} new tokens need "
        f"more KV cache than the server holds ({kv_cache_tokens} tokens in all); "
        + (f"at most {per_sequence} new tokens per sequence fit." if per_sequence >= 1 else
           "lower best_of, shorten the prompt, or raise the server's cache_size."),
        field,
    )


def _checked_choices(request: SamplingRequest, best_of_limit: int, max_n: int) -> int:
    """n and best_of within their limits; best_of (n when unset)."""
    if request.n > max_n:
        raise invalid(f"'n' must be at most {max_n}, got {request.n}.", "n")
    best_of = request.best_of or request.n
    if best_of < request.n:
        raise invalid(f"'best_of' ({best_of}) must be at least 'n' ({request.n}).", "best_of")
    if best_of > best_of_limit:
        raise invalid(f"'best_of' must be at most {best_of_limit}, got {best_of}.", "best_of")
    return best_of


def _check_search(request: SamplingRequest, temperature: float, beam: bool, logprobs: int) -> None:
    """What beam search (best_of > 1) and greedy decoding cannot be combined with; and stream options without a
    stream, which OpenAI and vLLM refuse."""
    if request.stream_options is not None and not request.stream:
        raise invalid("'stream_options' is only allowed when 'stream' is true.", "stream_options")
    if beam and request.stream:
        raise invalid("'best_of' > 1 (beam search) cannot be streamed; set stream to false.", "best_of")
    if request.n > 1 and temperature <= 0 and not beam:
        raise invalid(
            f"'n' > 1 needs sampling (a temperature of at least {SAMPLING_EPSILON:g}) or 'best_of' >= n; greedy "
            "choices would be identical.", "n"
        )
    if beam and logprobs:
        raise invalid("'logprobs' cannot be combined with 'best_of' > 1.", "logprobs")
    if beam:
        # openvino_genai 2026.4's beam search refuses any penalty (its own check, which names the field but no
        # request parameter): refused here, before admission.
        for name, neutral in (("presence_penalty", 0.0), ("frequency_penalty", 0.0), ("repetition_penalty", 1.0)):
            if getattr(request, name) not in (None, neutral):
                raise invalid(f"'{name}' cannot be combined with 'best_of' > 1 (beam search) on this engine.", name)
    if beam and request.stop:
        # openvino_genai 2026.4's beam search fails inside the engine step when a stop string matches, which would
        # stop the model for every request; refuse the combination until the engine supports it.
        raise invalid("'stop' cannot be combined with 'best_of' > 1 (beam search) on this engine.", "stop")


def _check_constrained_search(request: SamplingRequest, best_of: int, param: str) -> None:
    """openvino_genai 2026.4 follows a grammar in one sequence per request only: with several sampled sequences the
    others leave it from their first token, and beam search ignores it. Refused rather than answered unconstrained."""
    if best_of > 1:
        field = "best_of" if request.best_of is not None and request.best_of > 1 else "n"
        raise invalid(
            f"'{field}' > 1 cannot be combined with an output constraint ('{param}') on this engine; "
            "send one request per answer instead.",
            field,
        )
    if request.ignore_eos:  # the grammar ends where its structure does, with the end of sequence ignore_eos skips
        raise invalid(f"'ignore_eos' cannot be combined with an output constraint ('{param}'): the output would go "
                      "on past the end of its structure, unconstrained.", "ignore_eos")


def _prompt_list(prompt: str | list[str] | list[int] | list[list[int]]) -> list[str | list[int]]:
    """A completion's prompt as a list of prompts: a string, or one list of token ids, is one prompt."""
    if isinstance(prompt, str):
        return [prompt]
    if prompt and isinstance(prompt[0], int):
        return [cast(list[int], prompt)]
    return cast(list[str | list[int]], list(prompt))


def _prompt_lookup(request: SamplingRequest, prompt_lookup: bool, beam: bool) -> tuple[int, int]:
    """(num_assistant_tokens, max_ngram_size): OVMS's names and defaults; (0, 0) for a model served without it."""
    if not prompt_lookup:
        for field in ("num_assistant_tokens", "max_ngram_size"):
            if getattr(request, field) is not None:
                raise invalid(
                    f"'{field}' applies only to a model served with prompt lookup decoding "
                    "(plugin_config {\"prompt_lookup\": true}).",
                    field,
                )
        return 0, 0
    # openvino_genai's prompt lookup decodes one sequence per request (n > 1 is run as n requests by the engine
    # client), and never with beam search.
    if beam:
        raise invalid(
            "'best_of' > 1 (beam search) is not available for a model served with prompt lookup decoding "
            "(plugin_config {\"prompt_lookup\": true}, or --prompt_lookup); serve it without to use beam search.",
            "best_of",
        )
    return (
        request.num_assistant_tokens or PROMPT_LOOKUP_DEFAULTS[0],
        request.max_ngram_size or PROMPT_LOOKUP_DEFAULTS[1],
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


@dataclass
class Prepared:
    """A request ready for its engine: the prompt's token ids and the generation parameters."""

    engine: Engine
    prompt_ids: list[int]
    params: GenerationParams
    prompt_text: str = ""
    output: OutputPlan = field(default_factory=OutputPlan)  # how a chat answer's text is read (chat_output.py)
    images: list[Image] = field(default_factory=list)  # a chat's images, in the order of their tags

    def generate(self) -> AsyncGenerator[RequestOutput, None]:
        return self.engine.generate(self.prompt_ids, self.params, self.prompt_text, self.images)



def engine_for(engines: dict[str, Engine], model: str | None) -> Engine:
    if not model:
        if len(engines) == 1:
            return next(iter(engines.values()))
        raise invalid(f"'model' is required; served models: {', '.join(engines)}.", "model")
    engine = engines.get(model)
    if engine is None:
        raise APIError(
            ErrorKind.NOT_FOUND,
            f"The model '{model}' does not exist; served models: {', '.join(engines)}.",
            "model",
            "model_not_found",
        )
    return engine


def admit(engine: Engine, settings: BackendSettings, prompts: Sequence[Sequence[int]], copies: int = 1) -> None:
    """The last check before the engine: the model is up and has room (429 past max_num_seqs + max_waiting_requests,
    or when the prompts' first tokens would come later than max_queue_wait, with the seconds to wait)."""
    health = engine.health()
    if not health.ready:
        raise APIError(ErrorKind.UNAVAILABLE, f"Model '{engine.name}' is not available: {health.message}.")
    capacity = engine.max_num_seqs + settings.max_waiting_requests
    if copies > capacity:  # more than the server ever holds: retrying cannot help, so no 429
        param = "n" if len(prompts) == 1 else "prompt"
        raise invalid(f"This request asks for {copies} sequences at once (its prompts times 'n'); the server holds at "
                      f"most {capacity} (max_num_seqs + max_waiting_requests).", param)
    if engine.in_flight() + copies > capacity:
        raise APIError(
            ErrorKind.OVERLOADED, f"The server is at capacity ({capacity} requests in flight); retry later."
        )
    limit = settings.max_queue_wait
    if not limit or not engine.in_flight():  # an idle engine serves any prompt it accepts, however long
        return
    wait = engine.queue_wait(prompts)
    if wait is not None and wait > limit:
        retry = min(math.ceil(wait - limit), MAX_RETRY_AFTER)
        raise APIError(
            ErrorKind.OVERLOADED,
            f"The server is at capacity: this request's first token would come in about {wait:.0f} s, past the "
            f"server's limit of {limit:g} s (max_queue_wait); retry in {retry} s.",
            retry_after=retry,
        )


def _params(
    request: SamplingRequest, engine: Engine, settings: BackendSettings, prompt_tokens: int, logprobs: int,
    forced: StructuredOutput | None = None,
) -> GenerationParams:
    return build_params(
        request,
        prompt_tokens=prompt_tokens,
        max_context=engine.max_context,
        best_of_limit=engine.best_of_limit,
        max_n=settings.max_n,
        logprobs=logprobs,
        prompt_lookup=engine.prompt_lookup,
        forced=forced,
        kv_cache_tokens=engine.kv_cache_tokens,
    )


def prepare_chat(engines: dict[str, Engine], settings: BackendSettings, request: ChatCompletionRequest) -> Prepared:
    """A chat request checked, templated and tokenized, with its engine parameters (not yet admitted)."""
    reject_unknown_fields(request)
    engine = engine_for(engines, request.model)
    logprobs = chat_logprobs(request)
    tools = plan_tools(request, engine.tool_parser, engine.reasoning_parser is not None)
    if tools.tools and not engine.supports_tools():
        raise invalid(f"The chat template of model '{engine.name}' does not support tools.", "tools")
    images = [decode_image(ref) for ref in checked_image_refs(engine, request.messages)]
    messages = template_messages(request.messages)
    variables, add_generation_prompt = template_variables(request.chat_template_kwargs, request.add_generation_prompt,
                                                          request.continue_final_message)
    prompt = rendered(engine, messages, tools.tools, add_generation_prompt, variables, request.continue_final_message)
    prompt_ids = tokenized(engine, prompt, "messages", add_special_tokens=False)
    params = _params(request, engine, settings, len(prompt_ids), logprobs, tools.forced)
    output = tools.plan
    if output.reasoning:
        output = replace(output, inside=starts_inside(prompt))
    # A vision-language model takes the prompt's text, in which the image tags place the images.
    return Prepared(engine, prompt_ids, params, prompt if engine.vision else "", output, images)


def prepare_completion(
    engines: dict[str, Engine], settings: BackendSettings, request: CompletionRequest
) -> list[Prepared]:
    """Each prompt of a completion request checked and tokenized, with its engine parameters (not yet admitted)."""
    reject_unknown_fields(request)
    if request.suffix:
        raise invalid("'suffix' (fill-in-the-middle) is not supported.", "suffix")
    engine = engine_for(engines, request.model)
    logprobs = completion_logprobs(request)
    echo = _engine_echo(request, engine, logprobs)
    prompts = _prompt_list(request.prompt)
    if not prompts:
        raise invalid("'prompt' must not be empty.", "prompt")
    prepared = []
    for prompt in prompts:
        if isinstance(prompt, str):
            ids, text = tokenized(engine, prompt, "prompt"), prompt
        else:
            check_token_ids(prompt, engine.vocabulary, "prompt")
            ids, text = list(prompt), ""
        if not ids:
            raise invalid("'prompt' must not be empty.", "prompt")
        params = _params(request, engine, settings, len(ids), logprobs)
        if echo:
            if params.num_beams > 1:
                raise invalid("'best_of' > 1 (beam search) cannot be combined with 'echo' here.", "best_of")
            params = msgspec.structs.replace(params, echo=True)
        prepared.append(Prepared(engine, ids, params, text))
    return prepared


def template_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Messages as the chat template takes them: an image part becomes openvino-genai's tag for it, in place."""
    images = itertools.count()
    return [_template_message(m, images) for m in messages]


def checked_image_refs(engine: Engine, messages: list[ChatMessage]) -> list[ImageRef]:
    """The messages' images, refused (400) for a model that reads no images."""
    refs = image_refs(messages)
    if refs and not engine.vision:
        raise invalid(f"Model '{engine.name}' takes text only; images need a vision-language model.", refs[0].param)
    return refs


def _engine_echo(request: CompletionRequest, engine: Engine, logprobs: int) -> bool:
    """Whether the engine must give the prompt back: to score it (echo + logprobs), or because it is all there is
    to answer (max_tokens 0, which only echo allows). A plain echo is the prompt's text, added by the server."""
    if request.max_tokens == 0 and not request.echo:
        raise invalid("'max_tokens' must be at least 1 unless 'echo' is set (the prompt alone).", "max_tokens")
    if not request.echo or not (logprobs or request.max_tokens == 0):
        return False
    if logprobs and engine.prefix_caching:
        # openvino_genai scores only the prompt tokens it computes: a prefix taken from the cache would come back
        # without log probabilities. Refused rather than answered with holes.
        raise invalid(
            f"'echo' with 'logprobs' needs model '{engine.name}' served without prefix caching: the engine does not "
            "score prompt tokens it takes from the cache. Start the server with --enable_prefix_caching false.",
            "echo",
        )
    return True


def _template_message(message: ChatMessage, images: Iterator[int]) -> dict[str, Any]:
    content = message.content
    text = "".join(part.text if isinstance(part, TextPart) else image_tag(next(images)) for part in content) if (
        isinstance(content, list)) else message.text()
    out: dict[str, Any] = {"role": message.role, "content": text}
    if message.role == "developer":
        out["role"] = "system"
    if message.name:
        out["name"] = message.name
    if message.tool_calls:
        # Arguments stay the JSON text OpenAI's clients send: a template that writes them as an object
        # (`arguments | tojson`) gets one from the template engine (Minja parses them for such templates).
        out["tool_calls"] = [call.model_dump(exclude_none=True) for call in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out
