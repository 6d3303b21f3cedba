"""Instructions (sentence-transformers' prompts): a text put before each input, as instruction-tuned models were
trained with ("query: ", "Represent this sentence for searching relevant passages: "). The model's own come from
its folder's config_sentence_transformers.json ("prompts", "default_prompt_name"); the operator's (PROMPTS,
DEFAULT_PROMPT_NAME) are added over them. A request chooses one by name (TEI's and sentence-transformers'
`prompt_name`) or by what its texts are (`input_type`, as Cohere, Voyage and NVIDIA NIM name it): a query takes the
"query" prompt, a document the first of "document", "passage" and "corpus", as sentence-transformers' encode_query
and encode_document do, and none where the model has none. Neither: the default prompt, if any. Pure: given the
prompts, never the model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ovgenai_common.errors import APIError, ErrorKind

# What a request's input_type names, and the prompts that serve it, the first the model has.
QUERY_PROMPTS = ("query",)
DOCUMENT_PROMPTS = ("document", "passage", "corpus")
INPUT_TYPES: dict[str, tuple[str, ...]] = {
    "query": QUERY_PROMPTS, "search_query": QUERY_PROMPTS,
    "document": DOCUMENT_PROMPTS, "passage": DOCUMENT_PROMPTS, "search_document": DOCUMENT_PROMPTS,
}


@dataclass(frozen=True)
class Prompts:
    """Prompts by name, and the one a request that names none gets (None: none). Values only: it crosses to the
    model process inside the model's facts."""

    texts: dict[str, str] = field(default_factory=dict)
    default_name: str | None = None

    def __post_init__(self) -> None:
        if self.default_name is not None and self.default_name not in self.texts:
            raise ValueError(f"The default prompt '{self.default_name}' is not one of the prompts "
                             f"({self.listed()}).")

    def over(self, texts: Mapping[str, str], default_name: str | None) -> Prompts:
        """These prompts with the operator's added over them (a name of both: the operator's text), and the
        operator's default, if named, instead of the model's."""
        return Prompts({**self.texts, **texts}, default_name or self.default_name)

    def listed(self) -> str:
        return ", ".join(f"'{name}'" for name in sorted(self.texts)) or "none"

    def choose(self, prompt_name: str | None, input_type: str | None) -> str:
        """The text put before each input of a request (empty: none), or a 400 naming the field that asked for
        what the model does not have."""
        if prompt_name is not None and input_type is not None:
            raise APIError(ErrorKind.INVALID_REQUEST, "Give 'prompt_name' or 'input_type', not both.", "prompt_name")
        if prompt_name is not None:
            if prompt_name not in self.texts:
                raise APIError(ErrorKind.INVALID_REQUEST, f"Unknown prompt_name '{prompt_name}'; this model's prompts "
                               f"are: {self.listed()}.", "prompt_name")
            return self.texts[prompt_name]
        if input_type is not None:
            return next((self.texts[name] for name in INPUT_TYPES[input_type] if name in self.texts), "")
        return self.texts[self.default_name] if self.default_name is not None else ""


def prompted(prompt: str, texts: list[str]) -> list[str]:
    """The texts as the model is given them: the prompt before each (its tokens count, in the limit and the usage)."""
    return [prompt + text for text in texts] if prompt else texts
