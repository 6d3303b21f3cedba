"""How long a new request would wait for its first token: the prompt tokens queued ahead of it, at the model's rate.

The engine computes prompts at a rate autotune measured on this CPU (engine/engine_process/autotune.py); every admitted
request whose first token has not come yet still has its prompt ahead of the next one. A prompt's blocks that an earlier
prompt already holds are not computed again (the prefix cache, and prefix-aware admission holding the rest until the
first has filled it), so they are not counted: prompts are remembered as chained hashes of 32-token blocks, as the
prefix cache keys them. The estimate counts prompts only: a decoding batch slows prompts down, so it errs short, and a
refusal comes late rather than early."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

BLOCK_TOKENS = 32  # the CPU plugin's KV block: the prefix cache's unit
REMEMBERED_BLOCKS = 1 << 16  # ~2M prompt tokens: more than a CPU's KV cache holds, so more than it can reuse


class PrefillBacklog:
    def __init__(self, prefix_caching: bool, remembered: int = REMEMBERED_BLOCKS):
        self.prefix_caching = prefix_caching
        self.tokens = 0  # prompt tokens admitted and not yet computed
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self._remembered = remembered

    def _hashes(self, prompt: Sequence[int]) -> list[int]:
        hashes, chained = [], 0
        for start in range(0, len(prompt) - len(prompt) % BLOCK_TOKENS, BLOCK_TOKENS):
            chained = hash((chained, *prompt[start:start + BLOCK_TOKENS]))
            hashes.append(chained)
        return hashes

    def uncached(self, prompt: Sequence[int]) -> int:
        """The tokens of `prompt` the engine is expected to compute: those past its longest remembered prefix."""
        if not self.prefix_caching:
            return len(prompt)
        cached = 0
        for chained in self._hashes(prompt):
            if chained not in self._blocks:
                break
            cached += BLOCK_TOKENS
        return len(prompt) - cached

    def add(self, prompt: Sequence[int]) -> int:
        """An admitted prompt: its uncached tokens join the backlog (returned, to `done` later) and its blocks are
        remembered for the prompts after it."""
        tokens = self.uncached(prompt)
        self.tokens += tokens
        if self.prefix_caching:
            for chained in self._hashes(prompt):
                self._blocks[chained] = None
                self._blocks.move_to_end(chained)
            while len(self._blocks) > self._remembered:
                self._blocks.popitem(last=False)
        return tokens

    def done(self, tokens: int) -> None:
        """A prompt computed (its first token came) or abandoned."""
        self.tokens = max(0, self.tokens - tokens)

    def wait_seconds(self, prompts: Sequence[Sequence[int]], tokens_per_s: float) -> float:
        """Seconds until the last of `prompts` would have its first token, were they admitted now."""
        ahead = self.tokens + sum(self.uncached(prompt) for prompt in prompts)
        return ahead / tokens_per_s
