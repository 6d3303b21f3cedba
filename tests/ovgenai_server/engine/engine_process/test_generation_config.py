"""Every sampling field reaches openvino_genai's real GenerationConfig (the object the pipeline reads)."""

from __future__ import annotations

import pytest

from ovgenai_server.engine.contract.types import GenerationParams, StructuredOutput
from ovgenai_server.engine.engine_process.generation_config import build_generation_config

EOS = [2, 7]


def test_sampling_fields_reach_the_config():
    params = GenerationParams(
        max_new_tokens=12, do_sample=True, temperature=0.7, top_p=0.9, top_k=40, min_p=0.05, seed=1234,
        stop=("END",), presence_penalty=0.5, frequency_penalty=0.25, repetition_penalty=1.1, n=3, logprobs=1,
    )
    config = build_generation_config(params, EOS)
    assert config.max_new_tokens == 12 and config.do_sample
    assert config.temperature == pytest.approx(0.7) and config.top_p == pytest.approx(0.9)
    assert config.top_k == 40 and config.min_p == pytest.approx(0.05) and config.rng_seed == 1234
    assert config.presence_penalty == pytest.approx(0.5) and config.frequency_penalty == pytest.approx(0.25)
    assert config.repetition_penalty == pytest.approx(1.1)
    assert config.num_return_sequences == 3 and config.logprobs == 1
    # the API process ends the request at a stop string (engine/api_process/stop_text.py)
    assert not config.stop_strings
    assert config.eos_token_id == 2 and config.stop_token_ids == {2, 7}


def test_the_engine_is_told_the_stop_strings_when_it_ends_the_request():
    stops = GenerationParams(max_new_tokens=12, stop=("END",))
    config = build_generation_config(stops, EOS, engine_stops=True)
    assert config.stop_strings == {"END"} and config.include_stop_str_in_output


def test_a_sampled_request_without_a_seed_gets_a_fresh_one():
    params = GenerationParams(max_new_tokens=4, do_sample=True)
    seeds = {build_generation_config(params, EOS).rng_seed for _ in range(4)}
    assert len(seeds) == 4  # openvino_genai's default (0) would make every such request give the same answer


def test_seeds_that_differ_only_in_their_high_half_differ_for_the_engine():
    """The engine's generator keeps a seed's low 32 bits: 1, 2**32 + 1 and 2**63 + 1 sampled one text."""
    def seed(value):
        return build_generation_config(GenerationParams(max_new_tokens=4, do_sample=True, seed=value), EOS).rng_seed

    assert all(seed(value) < 2**32 for value in (2**32 + 1, 2**64 - 1, 2**63))
    assert len({seed(value) for value in (1, 2**32 + 1, 2**63 + 1, 2**40 + 1)}) == 4
    assert [seed(value) for value in (0, 1, 12345, 2**32 - 1)] == [0, 1, 12345, 2**32 - 1]  # the engine's own


def test_greedy_leaves_sampling_off_and_beams_return_n_of_them():
    greedy = build_generation_config(GenerationParams(max_new_tokens=4, temperature=0.7, top_p=0.5), EOS)
    assert not greedy.do_sample and greedy.num_beams == 1
    beams = build_generation_config(GenerationParams(max_new_tokens=4, num_beams=3, n=2), EOS)
    assert beams.num_beams == 3 and beams.num_return_sequences == 2 and not beams.do_sample


def test_ignore_eos_and_a_json_schema_reach_the_config():
    schema = '{"type": "object"}'
    structured = StructuredOutput("json_schema", schema)
    params = GenerationParams(max_new_tokens=4, ignore_eos=True, structured_output=structured)
    config = build_generation_config(params, EOS)
    assert config.ignore_eos
    assert config.structured_output_config is not None and config.structured_output_config.json_schema == schema
