"""A request's generation parameters as openvino_genai's GenerationConfig, built in the engine process."""

from __future__ import annotations

import secrets

from ..contract.types import GenerationParams
from .grammar_compiler import structured_output_config


def engine_seed(seed: int) -> int:
    """A request's 64-bit seed as the engine's generator takes it: openvino_genai's rng_seed holds 64 bits, but its
    sampler's generator keeps the low 32 (seeds 1 and 2**32 + 1 sampled the same text). The high half is folded into
    the low one, so seeds that differ only there differ here too; a seed below 2**32 is the engine's own."""
    return (seed ^ (seed >> 32)) & 0xFFFFFFFF


def build_generation_config(params: GenerationParams, eos_token_ids: list[int], engine_stops: bool = False):
    """`engine_stops`: tell the engine the stop strings (engine_ends_at_stops)."""
    import openvino_genai

    config = openvino_genai.GenerationConfig()
    config.apply_chat_template = False  # a prompt given as text is already templated by the API process
    config.max_new_tokens = params.max_new_tokens
    if eos_token_ids:
        config.eos_token_id = eos_token_ids[0]
        config.stop_token_ids = set(eos_token_ids)
    config.ignore_eos = params.ignore_eos
    if params.min_new_tokens:
        config.min_new_tokens = params.min_new_tokens
    if engine_stops:
        config.stop_strings = set(params.stop)
        config.include_stop_str_in_output = True  # every token back: the API process cuts the text
    config.repetition_penalty = params.repetition_penalty
    config.presence_penalty = params.presence_penalty
    config.frequency_penalty = params.frequency_penalty
    if params.num_beams > 1:
        config.num_beams = params.num_beams
        config.num_beam_groups = 1
        config.num_return_sequences = params.n
    elif params.do_sample:
        config.do_sample = True
        config.temperature = params.temperature
        config.top_p = params.top_p
        config.top_k = params.top_k if params.top_k > 0 else 0
        config.min_p = params.min_p
        config.num_return_sequences = params.n
        # openvino_genai seeds every request's generator with rng_seed, 0 unless set: without a seed of its own,
        # every sampled request would give the same answer (and the n requests of a fanned-out request the same
        # choice). As with OpenAI and vLLM, a request without a seed samples afresh.
        config.rng_seed = engine_seed(params.seed) if params.seed is not None else secrets.randbits(32)
    if params.logprobs:
        config.logprobs = params.logprobs
    if params.echo:
        config.echo = True
    if params.num_assistant_tokens:
        config.num_assistant_tokens = params.num_assistant_tokens
        config.max_ngram_size = params.max_ngram_size
    if params.structured_output is not None:
        config.structured_output_config = structured_output_config(params.structured_output)
    config.validate()
    return config
