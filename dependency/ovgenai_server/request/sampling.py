"""A request's sampling fields as the engine's `GenerationParams`: values as the engine holds them (32-bit floats,
a 32-bit generator), the new-token budget within the context and the KV cache, and the combinations the engine
cannot run refused with a 400 naming the field."""

from __future__ import annotations

from ovgenai_common.errors import invalid
from ovgenai_common.protocol import FLOAT32_SMALLEST_NORMAL

from ..api.protocol import MAX_STOP_LENGTH, MAX_STOP_STRINGS, ChatCompletionRequest, CompletionRequest, SamplingRequest
from ..engine.contract.types import PROMPT_LOOKUP_DEFAULTS, GenerationParams, StructuredOutput
from ..models.generation_defaults import GenerationDefaults
from ..models.registry import ModelFacts
from .structured_output import requested

TOP_K_EVERY_TOKEN = 2**31 - 1  # more than any vocabulary
# A temperature below this decodes greedily, as vLLM's does: dividing logits by less cannot change which token is
# likeliest, and the engine's 32-bit float turns a temperature below ~1e-38 into a denormal (random tokens) or zero.
SAMPLING_EPSILON = 1e-5
MIN_P_LARGEST = 1 - 2**-24  # the largest float32 below 1
KV_BLOCK_TOKENS = 32  # the CPU plugin's KV block (engine/contract/kv_cache.py)
# A request of several sequences (best_of's beams, n's choices) reserves at most a quarter of the KV cache, or one full
# context where that is more: one beam search of 20 long beams took the cache, and other clients got no token.
KV_REQUEST_SHARE = 4
NO_DEFAULTS = GenerationDefaults()


def params_for(request: SamplingRequest, facts: ModelFacts, kv_cache_tokens: int | None, max_n: int,
               prompt_tokens: int, logprobs: int, forced: StructuredOutput | None = None) -> GenerationParams:
    """`build_params` with the model's limits."""
    return build_params(request, prompt_tokens=prompt_tokens, max_context=facts.max_context,
                        best_of_limit=facts.best_of_limit, max_n=max_n, logprobs=logprobs,
                        prompt_lookup=facts.prompt_lookup, forced=forced, kv_cache_tokens=kv_cache_tokens,
                        draft_tokens=facts.draft_tokens, defaults=facts.generation)


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
    draft_tokens: int = 0,
    defaults: GenerationDefaults = NO_DEFAULTS,
) -> GenerationParams:
    """The engine's parameters for an admitted request; a 400 naming the field for a combination it cannot run.
    `forced` is the grammar a tool_choice forces a call with (tools/choice.py); `kv_cache_tokens` what the engine's
    KV cache holds, when it is fixed; `defaults` what the request's unset fields take (the model's own)."""
    _unsupported(request)
    request = _with_defaults(request, defaults)
    max_new_tokens = _new_token_budget(request, prompt_tokens, max_context, defaults.max_new_tokens)
    best_of = _checked_choices(request, best_of_limit, max_n)
    temperature = 1.0 if request.temperature is None else request.temperature
    temperature = 0.0 if temperature < SAMPLING_EPSILON else temperature
    beam = request.best_of is not None and request.best_of > 1
    if kv_cache_tokens:
        max_new_tokens = _kv_cache_budget(request, prompt_tokens, max_new_tokens, best_of if beam else request.n,
                                          kv_cache_tokens, max_context)
    _check_search(request, temperature, beam, logprobs)
    num_assistant_tokens, max_ngram_size = _speculation(request, prompt_lookup, draft_tokens, beam)
    structured_output = _constraint(request, forced, best_of)
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
        min_new_tokens=_min_tokens(request, max_new_tokens),
        logprobs=logprobs,
        structured_output=structured_output,
        num_assistant_tokens=num_assistant_tokens,
        max_ngram_size=max_ngram_size,
    )


def _constraint(request: SamplingRequest, forced: StructuredOutput | None, best_of: int) -> StructuredOutput | None:
    """The one grammar the output follows: the request's, or the one its tool_choice forces (never both)."""
    structured_output = requested(request)
    if forced is not None and structured_output is not None:
        reason = ("'tool_choice' forces a tool call" if forced.param == "tool_choice" else
                  "'tools' are answered in a form a grammar holds (the chat template has no tool syntax)")
        raise invalid(f"{reason}, which cannot be combined with '{structured_output.param}'.", forced.param)
    structured_output = structured_output or forced
    if structured_output is not None:
        _check_constrained_search(request, best_of, structured_output.param)
    return structured_output


def _with_defaults(request: SamplingRequest, defaults: GenerationDefaults) -> SamplingRequest:
    """The request with the sampling fields it left unset taken from `defaults` (max_tokens: _new_token_budget)."""
    unset = {name: value for name in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
             if getattr(request, name) is None and (value := getattr(defaults, name)) is not None}
    return request.model_copy(update=unset) if unset else request


def _new_token_budget(request: SamplingRequest, prompt_tokens: int, max_context: int,
                      default: int | None = None) -> int:
    """max_tokens (or max_completion_tokens) when it fits beside the prompt, else the room the context leaves (or
    the model's default, `default`, within it)."""
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
    return max_tokens if max_tokens is not None else min(room, default or room)


def _kv_reserve(sequences: int, kv_cache_tokens: int, max_context: int) -> int:
    """The KV cache one request may reserve: all of it for one sequence; for several, their share of it."""
    if sequences == 1:
        return kv_cache_tokens
    return min(kv_cache_tokens, max(kv_cache_tokens // KV_REQUEST_SHARE, max_context))


def _kv_cache_budget(request: SamplingRequest, prompt_tokens: int, max_new_tokens: int, sequences: int,
                     kv_cache_tokens: int, max_context: int) -> int:
    """The new tokens per sequence that fit the KV cache the request may reserve (_kv_reserve) with all of its
    sequences at their longest.

    openvino_genai runs a request's sequences (one, or a beam search's beams) as one group, preempted and computed
    again as one: a group that can outgrow the whole cache never finishes, and its steps go round for as long as it
    stays, taking the cache from every other request, or, when nothing else can be scheduled, failing them all with
    "does not fit". So such a request is refused here, before it runs, and one of several sequences is held to its
    share of the cache (KV_REQUEST_SHARE). A max_tokens left unset is cut to what fits."""
    reserve = _kv_reserve(sequences, kv_cache_tokens, max_context)
    # In blocks: the prompt's whole blocks are shared by the sequences, and from its last, partial one on each
    # sequence has blocks of its own.
    shared = prompt_tokens // KV_BLOCK_TOKENS
    own = (reserve // KV_BLOCK_TOKENS - shared) // sequences
    per_sequence = (shared + own) * KV_BLOCK_TOKENS - prompt_tokens
    if max_new_tokens <= per_sequence:
        return max_new_tokens
    explicit = request.max_tokens is not None or (
        isinstance(request, ChatCompletionRequest) and request.max_completion_tokens is not None)
    if per_sequence >= 1 and not explicit:
        return per_sequence
    field = ("best_of" if request.best_of is not None and request.best_of > 1 else "n") if sequences > 1 else \
        "max_tokens" if per_sequence >= 1 else "messages" if isinstance(request, ChatCompletionRequest) else "prompt"
    held = (f"more KV cache than a request of several sequences may take ({reserve} of the server's "
            f"{kv_cache_tokens} tokens)" if reserve < kv_cache_tokens else
            f"more KV cache than the server holds ({kv_cache_tokens} tokens in all)")
    raise invalid(
        f"The prompt ({prompt_tokens} tokens) and {sequences} sequence(s) of up to {max_new_tokens} new tokens need "
        f"{held}; " + (f"at most {per_sequence} new tokens per sequence fit." if per_sequence >= 1 else
                       f"lower {field}, shorten the prompt, or raise the server's cache_size."),
        field,
    )


def _unsupported(request: SamplingRequest) -> None:
    """What a client could be misled by if it were accepted and ignored."""
    if getattr(request, "logit_bias", None):
        raise invalid("'logit_bias' is not supported: the OpenVINO engine takes no logits processor that could bias "
                      "tokens (a grammar, response_format or structured_outputs, constrains the output instead).",
                      "logit_bias")


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


def _min_tokens(request: SamplingRequest, max_new_tokens: int) -> int:
    if not request.min_tokens:
        return 0
    if request.min_tokens > max_new_tokens:
        raise invalid(f"'min_tokens' ({request.min_tokens}) must not exceed the new tokens the request may have "
                      f"({max_new_tokens}).", "min_tokens")
    return request.min_tokens


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
    for field in ("ignore_eos", "min_tokens"):  # a grammar ends where its structure does, with an end of sequence
        if getattr(request, field):
            raise invalid(f"'{field}' cannot be combined with an output constraint ('{param}'): the output would "
                          "go on past the end of its structure, unconstrained.", field)


def _speculation(request: SamplingRequest, prompt_lookup: bool, draft_tokens: int, beam: bool) -> tuple[int, int]:
    """(num_assistant_tokens, max_ngram_size): a draft model's, prompt lookup's, or (0, 0) for neither."""
    if draft_tokens:
        return _draft(request, draft_tokens, beam), 0
    return _prompt_lookup(request, prompt_lookup, beam)


def _draft(request: SamplingRequest, draft_tokens: int, beam: bool) -> int:
    """num_assistant_tokens for a model served with a draft model: the request's (OVMS's name), or the server's."""
    if request.max_ngram_size is not None:
        raise invalid("'max_ngram_size' applies to prompt lookup decoding; this model is served with a draft model "
                      "(its tokens per step: 'num_assistant_tokens').", "max_ngram_size")
    # n sampled choices run as n requests of one sequence each (engine/api_process/runtime.py), as with prompt lookup
    if beam:
        raise invalid("'best_of' > 1 (beam search) is not available for a model served with a draft model; serve it "
                      "without one to use beam search.", "best_of")
    return request.num_assistant_tokens or draft_tokens


def _prompt_lookup(request: SamplingRequest, prompt_lookup: bool, beam: bool) -> tuple[int, int]:
    """(num_assistant_tokens, max_ngram_size): OVMS's names and defaults; (0, 0) for a model served without it."""
    if not prompt_lookup:
        for field in ("num_assistant_tokens", "max_ngram_size"):
            if getattr(request, field) is not None:
                raise invalid(
                    f"'{field}' applies only to a model served with prompt lookup decoding "
                    "(plugin_config {\"prompt_lookup\": true}) or with a draft model (--draft_model).",
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


# openvino_genai scores the chosen token only: one "alternative" can be listed (the chosen token itself, as OVMS lists
# it), never the others the model weighed.
MAX_ALTERNATIVES = 1


def chat_logprobs_asked(request: ChatCompletionRequest) -> int:
    """The engine's `logprobs` for a chat request (1: each chosen token's); `top_logprobs` may ask for the one
    alternative the engine knows (output/logprobs.py lists it)."""
    if request.top_logprobs:
        if request.top_logprobs > MAX_ALTERNATIVES:
            raise invalid(f"'top_logprobs' may be at most {MAX_ALTERNATIVES} on the OpenVINO engine, which scores the "
                          "chosen token only (listed as its one alternative).", "top_logprobs")
        if not request.logprobs:
            raise invalid("'top_logprobs' needs 'logprobs' set to true.", "top_logprobs")
    return 1 if request.logprobs else 0


def completion_logprobs_asked(request: CompletionRequest) -> int:
    """The engine's `logprobs` for a completion (1: each chosen token's, for `logprobs` 0 or 1: 1 also lists the
    chosen token as the one alternative, output/logprobs.py)."""
    if request.logprobs is None:
        return 0
    if request.logprobs > MAX_ALTERNATIVES:
        raise invalid(
            f"'logprobs' may be at most {MAX_ALTERNATIVES} on the OpenVINO engine, which scores the chosen token only "
            "(listed as its one alternative); use 0 for each chosen token's log probability alone.",
            "logprobs",
        )
    return 1


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
