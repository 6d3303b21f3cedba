"""What OPEA's clients send and expect: the microservice health-check body, kept byte-compatible, and the prompt
template (`chat_template`) with its {question} and {context} placeholders."""

from __future__ import annotations

import re
from typing import Any

from .errors import APIError, ErrorKind

_PLACEHOLDER = re.compile(r"\{(question|context)\}")

VERSION = "1.0"


def health_check_body(service: str, *, version: bool = True, **extra: Any) -> dict[str, Any]:
    """OPEA's body, in OPEA's key order. `version=False` gives the exact body of OPEA's guide for the LLM
    microservice (no Version key), which OPEA clients and scripts compare verbatim."""
    body: dict[str, Any] = {"Service Title": f"opea_service@{service}/MicroService"}
    if version:
        body["Version"] = VERSION
    body["Service Description"] = "OPEA Microservice Infrastructure"
    return {**body, **extra}


def filled_length(template: str, values: dict[str, str]) -> int:
    """How many characters the template will have once filled in, counted without building it."""
    return len(template) + sum(len(values[match.group(1)]) - len(match.group(0))
                               for match in _PLACEHOLDER.finditer(template))


def fill_template(template: str, question: str, context: str = "", *, max_chars: int) -> str:
    """OPEA's `chat_template` with {question} and {context} filled in, in one pass: nothing else in the template is
    read (str.format would follow `{question.__class__}`, pad by `{question:>300000000}`, and fail on a brace), and
    nothing in the question or context is read as a placeholder.

    Each placeholder is replaced by its whole value, so a small request could ask for a huge prompt
    (`"{question}" * 10000` with a 100 KB question is 1 GB): past `max_chars` the size, computed first, is a 400
    naming chat_template, and nothing is built. The callers pass their JSON body limit: a filled prompt may not be
    longer than one a client could have sent directly."""
    values = {"question": question, "context": context}
    length = filled_length(template, values)
    if length > max_chars:
        raise APIError(ErrorKind.INVALID_REQUEST, f"'chat_template' filled in would be {length} characters, more "
                       f"than the {max_chars} a request may carry: use {{question}} and {{context}} fewer times.",
                       "chat_template", code="chat_template_too_large")
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)
