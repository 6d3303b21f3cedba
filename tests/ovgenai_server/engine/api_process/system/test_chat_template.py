"""Chat-template resolution order, on the real openvino_genai tokenizer of the default model."""

from __future__ import annotations

import json

import openvino_genai
import pytest

from ovgenai_common.errors import library_reason
from ovgenai_server.engine.api_process.chat_template import FALLBACK_TEMPLATE, ChatTemplate
from tests.support.servers import DEFAULT_MODEL, MODELS

# Starts processes, servers or real pipelines: the system tier (not make test-unit).

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def tokenizer():
    return openvino_genai.Tokenizer(str(MODELS / DEFAULT_MODEL))


def test_builtin_template_from_the_converted_gguf(tokenizer, tmp_path):
    template = ChatTemplate.resolve(tmp_path, tokenizer)
    assert template.source == "tokenizer"
    assert template.render(tokenizer, MESSAGES).endswith("<|im_start|>assistant\n")


def test_override_order(tokenizer, tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "CFG {{ messages[0]['content'] }}"}))
    assert ChatTemplate.resolve(tmp_path, tokenizer).render(tokenizer, MESSAGES) == "CFG hi"
    (tmp_path / "chat_template.jinja").write_text("FILE {{ messages[0]['content'] }}")
    assert ChatTemplate.resolve(tmp_path, tokenizer).render(tokenizer, MESSAGES) == "FILE hi"
    (tmp_path / "template.jinja").write_text("OVERRIDE {{ messages[0]['content'] }}")
    assert ChatTemplate.resolve(tmp_path, tokenizer).render(tokenizer, MESSAGES) == "OVERRIDE hi"


def test_fallback_accepts_one_message_only(tokenizer):
    template = ChatTemplate(FALLBACK_TEMPLATE, "fallback")
    assert template.render(tokenizer, MESSAGES) == "hi"
    with pytest.raises(Exception, match="single message") as refused:
        template.render(tokenizer, MESSAGES * 2)
    # What the client reads: the template's reason (the last line of the library's text was a caret, "^").
    assert library_reason(refused.value) == ("This model has no chat template, so it accepts only single message "
                                             "requests")
