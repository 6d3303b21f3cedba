"""Autotune on the real server: the first start sweeps and says what it picked, the next reads it back, and a
request whose first token would come past max_queue_wait is refused at once with 429 and Retry-After."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.support.servers import MODELS, RemoteServer

PROSE = "The engine computes each prompt in chunks and decodes every running sequence once per step. " * 20


def _start(cache_dir, *args: str) -> RemoteServer:
    return RemoteServer("ovgenai_server", ["--model", str(MODELS), "--cache_dir", str(cache_dir),
                                           "--autotune_seconds", "10", *args], env={"AUTOTUNE": "true"})


def _tuning(server: RemoteServer, model: str) -> dict:
    return httpx.get(server.url + "/v1/config", timeout=10).json()[model]["autotune"]


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
