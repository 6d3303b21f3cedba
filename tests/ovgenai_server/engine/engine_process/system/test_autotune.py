"""Autotune on real pipelines: the sweep measures the default first and serves a configuration it measured, skips a
candidate the engine refuses, and leaves a model too slow for its budget on its defaults; on the real server the
first start sweeps and says what it picked, the next reads it back, and a request whose first token would come past
max_queue_wait is refused at once with 429 and Retry-After."""

from __future__ import annotations

import httpx
import openai
import pytest

from ovgenai_server.engine.contract.tuning import AutotunePlan
from ovgenai_server.engine.engine_process import autotune
from tests.ovgenai_server.engine.engine_process.test_autotune import refusing, tuned_spec
from tests.support.servers import MODELS, RemoteServer

PROSE = "The engine computes each prompt in chunks and decodes every running sequence once per step. " * 20


def _start(cache_dir, *args: str) -> RemoteServer:
    return RemoteServer("ovgenai_server", ["--model", str(MODELS), "--cache_dir", str(cache_dir),
                                           "--autotune_seconds", "10", *args], env={"AUTOTUNE": "true"})


def _tuning(server: RemoteServer, model: str) -> dict:
    return httpx.get(server.url + "/v1/config", timeout=10).json()[model]["autotune"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The real sweep on the default model, once for this module's tests."""
    spec = tuned_spec(tmp_path_factory.mktemp("autotune"), autotune_seconds=15)
    return spec, autotune.run_sweep(spec, spec.autotune)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("engine-cache")


def test_the_first_start_sweeps_and_the_next_reads_the_cache(cache_dir, default_model):
    with _start(cache_dir) as server:
        first = _tuning(server, default_model)
        assert not first["cached"] and first["trials"] and first["prefill_tokens_per_s"] > 0
        assert first["trials"][0]["max_num_batched_tokens"] == 512  # the default, measured first
        assert "autotune for" in server.logs()
    assert list((cache_dir / "autotune").glob("*.json"))
    with _start(cache_dir) as server:
        again = _tuning(server, default_model)
    assert again["cached"] and {k: v for k, v in again.items() if k != "cached"} == {
        k: v for k, v in first.items() if k != "cached"}


def test_no_autotune_serves_the_defaults_without_measuring(default_model, tmp_path):
    with RemoteServer("ovgenai_server", ["--model", str(MODELS), "--cache_dir", str(tmp_path), "--no-autotune"],
                      env={"AUTOTUNE": "true"}) as server:
        entry = httpx.get(server.url + "/v1/config", timeout=10).json()[default_model]
    assert "autotune" not in entry and not (tmp_path / "autotune").exists()


def test_a_request_that_would_wait_past_the_limit_is_refused_with_retry_after(cache_dir, default_model):
    # The limit is a millisecond: any prompt queued behind a running request would wait longer.
    with _start(cache_dir, "--max_queue_wait", "0.001") as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        messages = [{"role": "user", "content": PROSE}]
        # Alone on an idle engine, any prompt it accepts is served, however long.
        alone = client.chat.completions.create(model=default_model, messages=messages, max_tokens=4)
        assert alone.choices[0].message.content is not None
        running = client.chat.completions.create(model=default_model, messages=[{"role": "user", "content": "Hi"}],
                                                 max_tokens=400, stream=True, temperature=0,
                                                 extra_body={"ignore_eos": True})
        with running:
            next(iter(running))  # in flight: its first token came, it decodes on
            with pytest.raises(openai.RateLimitError) as refused:
                client.chat.completions.create(model=default_model, messages=messages + [
                    {"role": "assistant", "content": "Yes."}, {"role": "user", "content": "Again?"}], max_tokens=4)
        error = refused.value
        assert error.status_code == 429 and int(error.response.headers["retry-after"]) >= 1
        body = error.response.json()["error"]
        assert body["type"] == "rate_limit_error" and "max_queue_wait" in body["message"]
        # The refused request left nothing running: once the stream's abort is through, the server is idle again
        # and serves the same prompt (the client's retries honour Retry-After meanwhile).
        after = client.with_options(max_retries=3).chat.completions.create(
            model=default_model, messages=messages, max_tokens=4)
        assert after.choices[0].message.content is not None


def test_a_candidate_the_engine_refuses_is_skipped_and_the_model_served(tmp_path):
    spec = tuned_spec(tmp_path)
    plan = AutotunePlan(("kv_cache_precision",), 60.0)
    tuning = autotune.run_sweep(spec, plan, build=refusing(lambda candidate: candidate.kv_cache_precision))
    assert [(t.max_num_batched_tokens, t.kv_cache_precision) for t in tuning.trials] == [(512, None)]
    assert tuning.kv_cache_precision is None and "1 refused by the engine" in tuning.note
    # The defaults refused: serving them would fail alike, so the engine's error is what the start reports.
    with pytest.raises(RuntimeError, match="expect kvcache type"):
        autotune.run_sweep(spec, plan, build=refusing(lambda _candidate: True))


def test_the_sweep_measures_the_default_first_and_serves_one_it_measured(swept):
    _, tuning = swept
    assert tuning.trials[0].max_num_batched_tokens == 512 and tuning.trials[0].kv_cache_precision is None
    measured = {(t.max_num_batched_tokens, t.kv_cache_precision) for t in tuning.trials}
    assert (tuning.max_num_batched_tokens, tuning.kv_cache_precision) in measured
    assert tuning.prefill_tokens_per_s > 0 and all(t.seconds > 0 for t in tuning.trials)
    assert tuning.note


def test_a_model_too_slow_for_the_budget_keeps_its_defaults(tmp_path):
    """Seen through a clock that runs a thousand times fast, the default model is as slow as none here: its batch is
    cut off, the defaults kept, and the rest never built."""
    import time

    spec = tuned_spec(tmp_path, autotune_seconds=60)
    tuning = autotune.run_sweep(spec, spec.autotune, clock=lambda: time.monotonic() * 1000)
    assert len(tuning.trials) == 1 and (tuning.max_num_batched_tokens, tuning.kv_cache_precision) == (512, None)
    assert "cannot compute the sweep's batch" in tuning.note
