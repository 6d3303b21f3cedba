"""Chat workloads for bench/peers.py: natural-looking prose, seeded, sized in tokens by the model's tokenizer.

Prose rather than bench/workload.py's random words, because the two servers are compared as chat servers: the
text goes through each one's chat template and tokenizer, as users' text does.
"""

from __future__ import annotations

import random
from collections.abc import Callable

SUBJECTS = (
    "The harbor master", "Our small research team", "The old lighthouse keeper", "A visiting engineer",
    "The city council", "Most of the farmers", "The new public library", "Her younger brother", "The night nurse",
    "Every morning the baker", "The museum's curator", "A group of students", "The railway company",
    "The village choir", "Their landlord", "The river authority", "An experienced pilot", "The school principal",
    "The ferry captain", "A retired geologist",
)
VERBS = (
    "reviewed", "described", "carefully repaired", "questioned", "planned", "rebuilt", "measured", "discussed",
    "postponed", "celebrated", "photographed", "rewrote", "inspected", "painted", "translated", "tested",
    "argued about", "quietly finished", "sketched", "catalogued",
)
OBJECTS = (
    "the harbor wall", "a detailed report on water quality", "the schedule for the coming season",
    "the broken clock above the station", "a map of the northern valleys", "the recipe for rye bread",
    "the rules for borrowing rare books", "a letter from the ministry", "the budget for the new bridge",
    "the results of the spring survey", "an old wooden sailing boat", "the plans for a community garden",
    "the route of the evening bus", "a collection of folk songs", "the heating system of the town hall",
    "the history of the copper mine", "the safety instructions for visitors", "a proposal for cheaper tickets",
    "the drainage ditches along the road", "the notes from last week's meeting",
)
TAILS = (
    "before the winter storms arrived", "after a long meeting in the town hall", "because the budget had been cut",
    "with help from several volunteers", "while the rest of the village slept", "in less than a week",
    "despite the heavy rain", "for the third time this year", "without telling anyone", "at the request of the mayor",
    "as the tourists began to arrive", "long after the deadline had passed", "under a bright autumn sky",
    "using tools borrowed from a neighbour", "so that the children could follow it",
)
OPENERS = ("", "", "", "However, ", "Meanwhile, ", "In the end, ", "Not long after, ", "According to the paper, ")

QUESTIONS = (
    "How do I return {item} from order {number}?",
    "Can I change the delivery address for order {number}?",
    "Is {item} covered by the warranty if it broke after {days} days?",
    "Why was I charged twice for order {number}?",
    "Do you ship {item} to Norway, and how long does it take?",
    "What should I do if {item} arrived damaged?",
    "Can I cancel order {number} before it leaves the warehouse?",
    "How much does express delivery cost for {item}?",
)
ITEMS = ("the hiking boots", "a rain jacket", "the camping stove", "two sleeping bags", "the large backpack",
         "a water filter", "the trekking poles", "a tent for four people")

SYSTEM_HEADER = (
    "You are the customer support assistant of Northwind Outfitters, a shop for outdoor equipment. Answer "
    "politely and briefly, and follow the company notes below, which describe how the shop came to be and how "
    "its staff work.\n\n"
)


def sentence(rng: random.Random) -> str:
    opener = rng.choice(OPENERS)
    subject = rng.choice(SUBJECTS)
    if opener:
        subject = subject[0].lower() + subject[1:]
    return f"{opener}{subject} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}."


def prose(rng: random.Random, count_tokens: Callable[[str], int], tokens: int, prefix: str = "") -> str:
    """Whole sentences, in paragraphs of three or more, until the text reaches `tokens` tokens."""
    text, paragraph = prefix, 0
    while count_tokens(text) < tokens:
        if paragraph >= 3 and rng.random() < 0.3:
            text, paragraph = text + "\n\n", 0
        text += ("" if paragraph == 0 else " ") + sentence(rng)
        paragraph += 1
    return text


def long_prompts(count_tokens, count: int, low: int = 360, high: int = 445, seed: int = 0) -> list[list[dict]]:
    """One user message of prose each; with the chat template (and its default system prompt) ~400-500 tokens.

    The instruction comes last, so that the prompts share no prefix beyond the chat template's own.
    """
    rng = random.Random(seed)
    return [
        [{"role": "user", "content": prose(rng, count_tokens, rng.randint(low, high)) + "\n\nSummarise this text."}]
        for _ in range(count)
    ]


def shared_system_prompt(count_tokens, count: int, system_tokens: int = 1000, seed: int = 0) -> list[list[dict]]:
    """One ~1,000-token system prompt for all, then a different short question each: a prefix-cache workload."""
    rng = random.Random(seed)
    system = prose(rng, count_tokens, system_tokens, SYSTEM_HEADER)
    conversations = []
    for index in range(count):
        question = rng.choice(QUESTIONS).format(
            item=rng.choice(ITEMS), number=rng.randint(10000, 99999), days=rng.randint(10, 400)
        )
        conversations.append(
            [{"role": "system", "content": system}, {"role": "user", "content": f"Question {index + 1}: {question}"}]
        )
    return conversations


def rag_shaped(count_tokens, count: int, chunks: int = 4, chunk_tokens: int = 210, pool: int = 24,
               seed: int = 0) -> list[list[dict]]:
    """What the RAG gateway sends: its default system prompt with `chunks` retrieved passages of ~1,000 characters
    (its default chunk size) in {context}, then the question: ~1,000 prompt tokens, of which only the instruction
    before the passages is shared, since each question retrieves a different set from the pool in its own order."""
    from ovgenai_services.gateway.settings import DEFAULT_PROMPT

    rng = random.Random(seed)
    passages = [(f"notes-{index // 3 + 1}.pdf", prose(rng, count_tokens, chunk_tokens)) for index in range(pool)]
    conversations = []
    for index in range(count):
        retrieved = rng.sample(passages, chunks)
        context = "\n\n".join(f"[{document}] {text}" for document, text in retrieved)
        subject, thing = rng.choice(SUBJECTS), rng.choice(OBJECTS)
        question = f"Question {index + 1}: what did {subject[0].lower() + subject[1:]} do with {thing}, and when?"
        conversations.append([{"role": "system", "content": DEFAULT_PROMPT.replace("{context}", context)},
                              {"role": "user", "content": question}])
    return conversations


# The request whose prompt both servers must count alike: digits, punctuation, non-ASCII text and a system prompt,
# where tokenizers and chat templates tend to differ.
TOKEN_CHECK = [
    {"role": "system", "content": "You are a careful assistant. Today is 2024-06-30; prices are in EUR."},
    {"role": "user", "content": "Hi! Can you compare 12,345.67 and 1234567?  Also: naïve café — “quotes”, "
     "tabs\tand\nnew lines, don't/won't, x = [1, 2, 3]  # code"},
]
