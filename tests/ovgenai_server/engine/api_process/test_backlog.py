"""The prefill backlog: prompt tokens ahead of a new request, without the blocks the prefix cache already holds."""

from __future__ import annotations

from ovgenai_server.engine.api_process.backlog import BLOCK_TOKENS, PrefillBacklog

SYSTEM = list(range(1000, 1000 + 4 * BLOCK_TOKENS))  # a shared system prompt of four whole blocks


def test_without_prefix_caching_every_prompt_token_is_computed():
    backlog = PrefillBacklog(prefix_caching=False)
    assert backlog.add(SYSTEM + [1, 2]) == len(SYSTEM) + 2
    assert backlog.uncached(SYSTEM + [3]) == len(SYSTEM) + 1
    assert backlog.tokens == len(SYSTEM) + 2


def test_a_prefix_admitted_before_is_not_counted_again():
    backlog = PrefillBacklog(prefix_caching=True)
    first = backlog.add(SYSTEM + [1, 2, 3])
    assert first == len(SYSTEM) + 3
    # The second chat shares the four blocks: only its own question is computed.
    assert backlog.add(SYSTEM + [7, 8]) == 2
    assert backlog.tokens == first + 2
    # A prompt that differs inside the first block shares nothing (the blocks are chained, as the cache's are).
    assert backlog.uncached([0] + SYSTEM[1:]) == len(SYSTEM)


def test_done_takes_a_prompt_out_and_the_wait_is_the_backlog_at_the_rate():
    backlog = PrefillBacklog(prefix_caching=True)
    first = backlog.add(list(range(300)))
    second = backlog.add(list(range(500, 700)))
    assert backlog.wait_seconds([list(range(900, 1000))], tokens_per_s=100) == (300 + 200 + 100) / 100
    backlog.done(first)
    backlog.done(second)
    assert backlog.tokens == 0
    backlog.done(5)  # a prompt released twice never makes the backlog negative
    assert backlog.tokens == 0


def test_the_oldest_blocks_are_forgotten_past_the_limit():
    backlog = PrefillBacklog(prefix_caching=True, remembered=4)
    backlog.add(SYSTEM)
    backlog.add(list(range(5000, 5000 + 2 * BLOCK_TOKENS)))  # two more blocks: the system prompt's first two go
    assert backlog.uncached(SYSTEM) == len(SYSTEM)
