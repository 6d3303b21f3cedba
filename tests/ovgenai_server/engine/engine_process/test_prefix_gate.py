"""Prefix-aware admission, as pure logic (the engine process drives it; tests/ovgenai_server/system covers it live)."""

from __future__ import annotations

from ovgenai_server.engine.contract.messages import AddRequest
from ovgenai_server.engine.contract.types import GenerationParams, TokenPrompt
from ovgenai_server.engine.engine_process.prefix_gate import PrefixGate

SHARED = list(range(1000, 1008))
PARAMS = GenerationParams(max_new_tokens=4)


def request(request_id: int, prompt: list[int], params: GenerationParams = PARAMS) -> AddRequest:
    return AddRequest(request_id, TokenPrompt(prompt), params)


def test_followers_wait_for_the_leaders_prompt_then_all_go_at_once():
    gate = PrefixGate(min_shared=8)
    assert gate.admit(request(1, SHARED + [1]))  # the leader
    assert not gate.admit(request(2, SHARED + [2]))
    assert not gate.admit(request(3, SHARED + [3]))
    assert gate.admit(request(4, list(range(8)) + [4]))  # another prefix: not held
    assert gate.admit(request(5, SHARED[:5]))  # too short to share enough: not held
    assert gate.held == 2
    released = gate.prompt_done(1, computed=True)
    assert [c.request_id for c in released] == [2, 3] and gate.held == 0
    assert gate.admit(request(6, SHARED + [6]))  # the prefix is cached now: straight in, leading nothing
    assert not gate.is_leader(6)


def test_a_leader_that_never_computed_its_prompt_hands_over_to_the_next():
    gate = PrefixGate(min_shared=8)
    gate.admit(request(1, SHARED + [1]))
    gate.admit(request(2, SHARED + [2]))
    gate.admit(request(3, SHARED + [3]))
    released = gate.prompt_done(1, computed=False)  # aborted, or did not fit the KV cache
    assert [c.request_id for c in released] == [2] and gate.is_leader(2) and gate.held == 1
    assert [c.request_id for c in gate.prompt_done(2, computed=True)] == [3]


def test_an_aborted_follower_is_forgotten_and_others_are_untouched():
    gate = PrefixGate(min_shared=8)
    gate.admit(request(1, SHARED + [1]))
    gate.admit(request(2, SHARED + [2]))
    gate.admit(request(3, SHARED + [3]))
    assert gate.drop(2) and not gate.drop(2) and not gate.drop(1)
    assert [c.request_id for c in gate.prompt_done(1, computed=True)] == [3]


def test_beam_search_is_never_held_nor_leads():
    gate = PrefixGate(min_shared=8)
    beams = GenerationParams(max_new_tokens=4, num_beams=2, n=2)
    assert gate.admit(request(1, SHARED + [1], beams)) and not gate.is_leader(1)
    assert gate.admit(request(2, SHARED + [2]))  # so a sampling request leads instead
    assert gate.prompt_done(99, computed=True) == []  # not a leader: nothing to release
