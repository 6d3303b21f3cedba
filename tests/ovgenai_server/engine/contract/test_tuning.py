"""What autotune found (engine/contract/tuning.py): the one line the server logs of it, and the tuning as it travels to
the API process and into the cache (msgspec). What it plans: test_model_specs.py; the sweep: test_autotune.py."""

from __future__ import annotations

import msgspec

from ovgenai_server.engine.contract.tuning import Trial, Tuning

TRIALS = [Trial(512, None, 10.0, 900.0), Trial(1024, "f16", 8.0, 1200.4)]


def tuning(**fields) -> Tuning:
    values = {"max_num_batched_tokens": 1024, "kv_cache_precision": "f16", "prefill_tokens_per_s": 1200.4,
              "trials": TRIALS, "seconds": 24.6, "note": "1024 with f16 was 20% faster", "cpu": "Xeon"}
    return Tuning(**{**values, **fields})


def test_the_description_says_what_was_chosen_and_how():
    assert tuning().describe() == ("max_num_batched_tokens 1024, KV cache f16, prompts at 1200 tokens/s (swept in "
                                   "25 s): 1024 with f16 was 20% faster")


def test_a_cached_choice_and_the_devices_own_precision_say_so():
    described = tuning(kv_cache_precision=None, cached=True).describe()
    assert "KV cache the device's own" in described and "(cached)" in described and "swept" not in described


def test_a_tuning_travels_as_it_was_made():
    made = tuning()
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(made), type=Tuning) == made
    assert msgspec.json.decode(msgspec.json.encode(made), type=Tuning) == made  # the cache file's form

