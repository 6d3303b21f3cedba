"""Which chat template a model uses, and rendering it.

Order: the template the server is given (vLLM's `--chat-template`: a file, or the template itself) overrides every
model's; then, as OVMS documents it, a `template.jinja` in the model folder; then the model's own
`chat_template.jinja`, the `chat_template` of `tokenizer_config.json`, the template inside the tokenizer (GGUF or
OpenVINO tokenizer metadata); and with none of those, OVMS's fallback that accepts a single message as-is.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

FALLBACK_TEMPLATE = (
    "{% if messages|length != 1 %}{{ raise_exception('This model has no chat template, so it accepts only "
    "single message requests') }}{% endif %}{{ messages[0]['content'] }}"
)


@dataclass(frozen=True)
class ChatTemplate:
    text: str
    source: str

    @property
    def supports_tools(self) -> bool:
        return "tools" in self.text

    @classmethod
    def resolve(cls, folder: Path, tokenizer: Any, given: str | None = None) -> ChatTemplate:
        if given:
            path = Path(given).expanduser()
            if "{" not in given and path.is_file():
                return cls(path.read_text(encoding="utf-8"), str(path))
            if "{" not in given:
                raise ValueError(f"--chat-template: {given} is neither a file nor a template")
            return cls(given, "--chat-template")
        for name in ("template.jinja", "chat_template.jinja"):
            path = folder / name
            if path.is_file():
                return cls(path.read_text(encoding="utf-8"), str(path))
        config = folder / "tokenizer_config.json"
        if config.is_file():
            try:
                template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
            except ValueError:
                template = None
            if isinstance(template, list):  # named templates: take the default one
                template = next((t.get("template") for t in template if t.get("name") == "default"), None)
            if template:
                return cls(template, str(config))
        builtin = getattr(tokenizer, "chat_template", "") if tokenizer is not None else ""
        if builtin:
            return cls(builtin, "tokenizer")
        logger.warning("no chat template found for %s; using the single-message fallback", folder)
        return cls(FALLBACK_TEMPLATE, "fallback")

    def render(
        self, tokenizer: Any, messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True,
        extra_context: dict[str, Any] | None = None,
    ) -> str:
        return tokenizer.apply_chat_template(
            messages, add_generation_prompt=add_generation_prompt, chat_template=self.text, tools=tools,
            extra_context=extra_context,
        )
