"""Admission (request/admission.py), on the fake runtime: 503 while the model is not up, 429 at capacity (sized on the
model's own batch), past a client's share, or when the first token would come past max_queue_wait, with the seconds to
wait; a request's places beyond its share at once are served in turns, not refused."""

from __future__ import annotations

import pytest

from ovgenai_common.errors import MAX_RETRY_AFTER, APIError, ErrorKind
from ovgenai_server.engine.contract.types import EngineState
from ovgenai_server.request.admission import Limits, admit
from ovgenai_server.request.fair_share import FairShare
from ovgenai_server.settings import BackendSettings
from tests.support.fake_engine import FakeRuntime, fake_model

LIMITS = Limits(max_n=4, max_waiting_requests=2, max_queue_wait=10.0)
PROMPT = [[1, 2, 3]]


def refusal(runtime: FakeRuntime, prompts=PROMPT, copies: int = 1, limits: Limits = LIMITS,
            max_num_seqs: int = 4, held: dict[str, int] | None = None) -> APIError | None:
    """Why `admit` refuses client "me"'s request on a model of `max_num_seqs` while clients hold `held` places; None
    when it admits it."""
    share = FairShare(runtime, max_num_seqs + limits.max_waiting_requests, max_num_seqs)
    share.held.update(held or {})
    try:
        admit(fake_model(runtime, max_num_seqs=max_num_seqs), limits, share, "me", prompts, copies)
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


def test_a_request_takes_its_places_in_turns_up_to_what_the_server_holds():
    # max_num_seqs (4) + max_waiting_requests (2) = 6 places; a request takes one at a time (4 // 4) and waits for
    # the next turn for the others, up to 6 ...
    assert refusal(FakeRuntime(), copies=6, held={"other": 5}) is None
    # ... and more than the server ever holds is a 400, not a 429 a retry cannot help.
    one_prompt = refusal(FakeRuntime(), copies=7)
    assert one_prompt.kind is ErrorKind.INVALID_REQUEST and one_prompt.param == "n"
    assert "at most 6" in one_prompt.message and "served 1 at a time" in one_prompt.message
    assert refusal(FakeRuntime(), prompts=[[1], [2]], copies=7).param == "prompt"


def test_a_full_server_is_a_429_sized_on_the_models_own_batch():
    refused = refusal(FakeRuntime(), held={"other": 6})
    assert refused.kind is ErrorKind.OVERLOADED and "(6 sequences in flight)" in refused.message
    assert refusal(FakeRuntime(), held={"other": 6}, max_num_seqs=8) is None  # a model with a larger batch has room


def test_the_last_places_are_kept_for_clients_below_their_share():
    # 4 + 12 = 16 places, the last 4 kept: one client alone takes up to 12 ...
    limits = Limits(max_n=4, max_waiting_requests=12, max_queue_wait=0)
    assert refusal(FakeRuntime(), limits=limits, held={"me": 11}) is None
    refused = refusal(FakeRuntime(), limits=limits, held={"me": 12})
    assert refused.kind is ErrorKind.OVERLOADED and "more than its share while others wait" in refused.message
    # ... and another client still gets in past them.
    assert refusal(FakeRuntime(), limits=limits, held={"flooding": 12}) is None


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
