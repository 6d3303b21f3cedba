"""The chat template a server is given (vLLM's --chat-template) over every model's own: a file, or the template
itself; neither is an error naming it. (Each model's own, on real tokenizers: system/test_chat_template.py.)"""

from __future__ import annotations

import pytest

from ovgenai_server.engine.api_process.chat_template import ChatTemplate

INLINE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def test_a_given_template_overrides_the_models_own(tmp_path):
    (tmp_path / "template.jinja").write_text("the model's own")
    assert ChatTemplate.resolve(tmp_path, None, INLINE) == ChatTemplate(INLINE, "--chat-template")
    given = tmp_path / "given.jinja"
    given.write_text(INLINE)
    assert ChatTemplate.resolve(tmp_path, None, str(given)) == ChatTemplate(INLINE, str(given))
    assert ChatTemplate.resolve(tmp_path, None).text == "the model's own"
    with pytest.raises(ValueError, match="neither a file nor a template"):
        ChatTemplate.resolve(tmp_path, None, str(tmp_path / "missing.jinja"))
