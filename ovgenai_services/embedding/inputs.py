"""A request's checks, each a 400 in OpenAI's error shape naming the request's own field: the inputs (texts or token
ids, how many), the fields this service does not know, the dimensions asked for (a Matryoshka model's vectors cut
to their first ones), vLLM's truncate_prompt_tokens, each text's tokens against the model's limit, and rerank's
documents. Pure: given the model's limits, never the model."""

from __future__ import annotations

from dataclasses import dataclass, field

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.tokens import check_token_ids

from .prompts import Prompts
from .protocol import EmbeddingRequest, RerankRequest

SMALL_INPUT_ITEMS = 64  # strings, or token ids, in an input whose check is done on the loop


def invalid(message: str, param: str | None = "input") -> APIError:
    return APIError(ErrorKind.INVALID_REQUEST, message, param)


def small_input(value: object) -> bool:
    """A string, or a list of at most SMALL_INPUT_ITEMS items, none of them a list longer than that: checked on the
    event loop, where a larger one's check is Python's work for a worker thread."""
    if isinstance(value, str):
        return True
    return isinstance(value, list) and len(value) <= SMALL_INPUT_ITEMS and not any(
        isinstance(item, list) and len(item) > SMALL_INPUT_ITEMS for item in value)


def non_empty(texts: list[str], field: str = "input") -> list[str]:
    """`texts`, each with something besides spaces in it."""
    for index, text in enumerate(texts):
        if not text.strip():
            raise invalid(f"Input {index} is empty; every input must contain text.", field)
    return texts


@dataclass(frozen=True)
class InputRules:
    """What a request is checked against: the served model's name, limits and facts, and the service's bounds."""

    name: str
    max_inputs: int  # texts, or rerank documents, in one request
    max_tokens: int  # a text's tokens the model takes
    dimensions: int
    vocabulary: int | None  # token ids the tokenizer knows (None: it cannot say)
    normalized: bool  # the model returns unit vectors
    prompts: Prompts = field(default_factory=Prompts)
    matryoshka: bool = False  # its vectors may be cut to their first dimensions
    matryoshka_dimensions: tuple[int, ...] = ()  # the sizes they may be cut to (empty: any)

    def inputs_of(self, value: object, field: str = "input") -> tuple[list[str], list[list[int]]]:
        """The request's texts, or its token-id inputs checked against the vocabulary (one of the two is empty).
        `field`: the request's name for it (OpenAI's `input`, TEI's `inputs`), which errors name."""
        if isinstance(value, str):
            inputs: tuple[list[str], list[list[int]]] = [value], []
        elif isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            inputs = [], [value]
        elif isinstance(value, list) and value and all(isinstance(v, list) for v in value):
            if any(not v or not all(isinstance(t, int) for t in v) for v in value):
                raise invalid("Token-id inputs must be non-empty lists of integers.", field)
            inputs = [], value
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            inputs = list(value), []
        elif isinstance(value, list) and not value:
            raise invalid(f"'{field}' must not be an empty list.", field)
        else:
            raise invalid(f"'{field}' must be a string, a list of strings, or token ids.", field)
        count = len(inputs[0]) + len(inputs[1])
        if count > self.max_inputs:
            raise invalid(f"Too many inputs: {count} (at most {self.max_inputs} per request).", field)
        for ids in inputs[1]:
            check_token_ids(ids, self.vocabulary, field)
        return inputs

    def check_options(self, body: EmbeddingRequest) -> None:
        """Fields this service does not know."""
        unknown = sorted(set(body.model_extra or {}))
        if unknown:
            raise invalid(f"Unsupported parameter(s): {', '.join(unknown)}.", unknown[0])

    def shortened_to(self, dimensions: int | None) -> int | None:
        """The size a request's vectors are cut to (None: the model's own). Only a Matryoshka model's first
        dimensions mean something alone: another model's are refused, naming it."""
        if dimensions is None or dimensions == self.dimensions:
            return None
        if dimensions > self.dimensions:
            raise invalid(f"Model '{self.name}' gives vectors of {self.dimensions} dimensions; 'dimensions' cannot "
                          "ask for more.", "dimensions")
        if not self.matryoshka:
            raise invalid(f"Model '{self.name}' is not a Matryoshka model: its vectors cannot be cut to fewer than "
                          f"their {self.dimensions} dimensions without losing their meaning.", "dimensions")
        if self.matryoshka_dimensions and dimensions not in self.matryoshka_dimensions:
            sizes = ", ".join(map(str, sorted({*self.matryoshka_dimensions, self.dimensions})))
            raise invalid(f"Model '{self.name}' gives vectors of {sizes} dimensions, not {dimensions}.", "dimensions")
        return dimensions

    def cut_of(self, truncate_prompt_tokens: int | None) -> int | None:
        """vLLM's truncate_prompt_tokens: the tokens each text is cut to, its first ones as the tokenizer cuts (-1:
        the model's limit); None keeps the service's policy for a text over the limit."""
        if truncate_prompt_tokens is None:
            return None
        if truncate_prompt_tokens == -1:
            return self.max_tokens
        if truncate_prompt_tokens < 1:
            raise invalid("'truncate_prompt_tokens' must be -1 (the model's limit) or at least 1.",
                          "truncate_prompt_tokens")
        if truncate_prompt_tokens > self.max_tokens:
            raise invalid(f"'truncate_prompt_tokens' is {truncate_prompt_tokens}; this model accepts at most "
                          f"{self.max_tokens} tokens.", "truncate_prompt_tokens")
        return truncate_prompt_tokens

    def normalizes(self, normalize: bool | None) -> bool:
        """Whether TEI's `normalize` asks the service to normalize vectors the model does not (None: as exported);
        `false` for a model that normalizes is refused."""
        if normalize is False and self.normalized:
            raise invalid(f"Model '{self.name}' returns normalized vectors; 'normalize': false is not available.",
                          "normalize")
        return bool(normalize) and not self.normalized

    def embedded_tokens(self, counts: list[int], truncate: bool, field: str = "input",
                        cut: int | None = None) -> list[int]:
        """Each text's tokens as embedded (at most `cut`, the model's limit unless the request asked for fewer), or
        the 400 of the first text over the limit when inputs are not truncated."""
        too_long = [i for i, n in enumerate(counts) if n > self.max_tokens]
        if too_long and not truncate:
            index = too_long[0]
            raise invalid(
                f"Input {index} has {counts[index]} tokens; this model accepts at most {self.max_tokens}.", field
            )
        return [min(n, cut or self.max_tokens) for n in counts]

    def documents(self, body: RerankRequest) -> list[str]:
        """Rerank's documents (TEI calls them `texts`), which it requires."""
        documents = body.documents if body.documents is not None else body.texts
        if documents is None:
            raise invalid("'documents' is required.", "documents")
        return documents

    def check_documents(self, documents: list[str]) -> None:
        """Some documents to rank, and not too many."""
        if not documents:
            raise invalid("'documents' must not be empty.", "documents")
        if len(documents) > self.max_inputs:
            raise invalid(f"Too many documents: {len(documents)} (at most {self.max_inputs} per request).",
                          "documents")
