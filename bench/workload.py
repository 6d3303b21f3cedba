"""A fixed synthetic workload: prompts of seeded random words, lengths from a seeded distribution."""

from __future__ import annotations

import random
from dataclasses import dataclass

WORDS = (
    "river mountain engine cloud signal garden market paper window silver planet forest music "
    "energy harbor lantern copper meadow rocket violet canyon thunder pepper marble falcon orbit "
    "quiet rapid golden hidden ancient modern gentle bright narrow frozen distant hollow"
).split()


@dataclass(frozen=True)
class Request:
    prompt_ids: list[int]
    output_tokens: int


def make_workload(tokenize, count: int, prompt_tokens: int, output_tokens: int, seed: int = 0) -> list[Request]:
    rng = random.Random(seed)
    requests = []
    for _ in range(count):
        target = max(8, int(rng.gauss(prompt_tokens, prompt_tokens * 0.1)))
        words = []
        ids: list[int] = []
        while len(ids) < target:
            words.extend(rng.choices(WORDS, k=32))
            ids = tokenize(" ".join(words))
        requests.append(Request(ids[:target], output_tokens))
    return requests
