"""What OPEA's clients send and expect: the microservice health-check body, kept byte-compatible, and the prompt
template (`chat_template`) with its {question} and {context} placeholders."""

from __future__ import annotations

import re
from typing import Any

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


def fill_template(template: str, question: str, context: str = "") -> str:
    """OPEA's `chat_template` with {question} and {context} filled in, in one pass: nothing else in the template is
    read (str.format would follow `{question.__class__}`, pad by `{question:>300000000}`, and fail on a brace), and
    nothing in the question or context is read as a placeholder."""
    values = {"question": question, "context": context}
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)
