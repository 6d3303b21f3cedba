"""Admission (admission.py), on the fake runtime: 503 while the model is not up, 400 for more sequences than the
server ever holds, 429 at capacity (sized on the model's own batch) or when the first token would come past
max_queue_wait, with the seconds to wait."""

from __future__ import annotations

import pytest

from ovgenai_common.errors import MAX_RETRY_AFTER, APIError, ErrorKind
from ovgenai_server.admission import Limits, admit
from ovgenai_server.engine.types import EngineState
from ovgenai_server.settings import BackendSettings
from tests.support.fake_engine import FakeRuntime, fake_model

LIMITS = Limits(max_n=4, max_waiting_requests=2, max_queue_wait=10.0)
PROMPT = [[1, 2, 3]]


def refusal(runtime: FakeRuntime, prompts=PROMPT, copies: int = 1, limits: Limits = LIMITS,
            max_num_seqs: int = 4) -> APIError | None:
    """Why `admit` refuses the request on a model of `max_num_seqs`; None when it admits it."""
    try:
        admit(fake_model(runtime, max_num_seqs=max_num_seqs), limits, prompts, copies)
    except APIError as error:
        return error
    return None


def test_the_limits_are_the_settings():
    assert Limits.of(BackendSettings(max_n=3, max_waiting_requests=5, max_queue_wait=7.5)) == Limits(3, 5, 7.5)


@pytest.mark.parametrize("state", [EngineState.LOADING, EngineState.FAILED])
def test_a_model_that_is_not_up_is_a_503_with_its_reason(state):
    refused = refusal(FakeRuntime(state=state))
    assert refused.kind is ErrorKind.UNAVAILABLE and "Model 'fake-model' is not available: Loading model" in (
        refused.message)


def test_more_sequences_than_the_server_ever_holds_is_a_400_not_a_429():
    # max_num_seqs (4) + max_waiting_requests (2) = 6: seven cannot be served even on an idle server.
    one_prompt = refusal(FakeRuntime(), copies=7)
    assert one_prompt.kind is ErrorKind.INVALID_REQUEST and one_prompt.param == "n"
    assert "at most 6" in one_prompt.message
    assert refusal(FakeRuntime(), prompts=[[1], [2]], copies=7).param == "prompt"
    assert refusal(FakeRuntime(), copies=6) is None


def test_a_full_server_is_a_429_sized_on_the_models_own_batch():
    runtime = FakeRuntime()
    runtime.active = 5
    assert refusal(runtime) is None  # the sixth fits
    refused = refusal(runtime, copies=2)
    assert refused.kind is ErrorKind.OVERLOADED and "(6 requests in flight)" in refused.message
    assert refusal(runtime, copies=2, max_num_seqs=8) is None  # a model with a larger batch has room


def test_a_first_token_expected_past_max_queue_wait_is_a_429_with_the_seconds_to_wait():
    runtime = FakeRuntime()
    runtime.active, runtime.wait_per_token = 1, 4.0  # three prompt tokens: twelve seconds' wait
    refused = refusal(runtime)
    assert refused.kind is ErrorKind.OVERLOADED and refused.retry_after == 2  # ceil(12 - 10)
    assert "about 12 s, past the server's limit of 10 s" in refused.message
    runtime.wait_per_token = 3.0  # nine seconds: within the limit
    assert refusal(runtime) is None


def test_the_wait_is_not_checked_on_an_idle_engine_or_without_a_limit_or_an_estimate():
    runtime = FakeRuntime()
    runtime.wait_per_token = 100.0
    assert refusal(runtime) is None  # idle: any prompt it accepts is served however long
    runtime.active = 1
    assert refusal(runtime, limits=Limits(4, 2, 0.0)) is None
    runtime.wait_per_token = None  # no estimate yet (no prompt rate measured)
    assert refusal(runtime) is None


def test_the_seconds_to_wait_are_capped():
    runtime = FakeRuntime()
    runtime.active, runtime.wait_per_token = 1, 1e6
    assert refusal(runtime).retry_after == MAX_RETRY_AFTER
