"""No client takes the LLM microservice from the others: every body it reads is JSON by the shared rules, whatever
its encoding or Content-Type headers, OPEA's chat_template cannot ask for a prompt larger than a request, and its
open probes say only up or down.

Its backend is an address nobody listens on: every request here is refused before it would be relayed."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.replies import refused
from tests.support.servers import RemoteServer, free_port


@pytest.fixture(scope="module")
def llm():
    env = {"LLM_ENDPOINT": f"http://127.0.0.1:{free_port()}", "LLM_MODEL": "m"}
    with RemoteServer("ovgenai_services.llm", env=env, health_path="/live") as server:
        yield server


BODY = json.dumps({"messages": [{"role": "user", "content": "hi \ud800"}], "stream": False})


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32-le"])
def test_json_in_another_encoding_is_400(llm, content_type, encoding):
    """It read UTF-16 and UTF-32 as Python's parser does and relayed a lone surrogate (a 500)."""
    reply = httpx.post(llm.url + "/v1/chat/completions", content=BODY.encode(encoding),
                       headers={"Content-Type": content_type}, timeout=30)
    refused(reply, "json_not_utf8")


def test_two_content_types_and_a_lone_surrogate_are_400(llm):
    headers = [("Content-Type", "application/json"), ("Content-Type", "text/plain")]
    reply = httpx.post(llm.url + "/v1/chat/completions", content=BODY.encode(), headers=headers, timeout=30)
    refused(reply, "content_type_repeated")
    reply = httpx.post(llm.url + "/v1/chat/completions", content=BODY.encode(), timeout=30,
                       headers={"Content-Type": "text/plain"})
    refused(reply, "invalid_json", "messages.0.content")


def test_a_chat_template_cannot_fill_a_prompt_larger_than_a_request(llm):
    """A 15 KB request made a 5 MB prompt (1 GB with a 100 KB question) before anything refused it."""
    body = {"query": "q" * 5_000, "chat_template": "{question}" * 1_000, "stream": False}
    reply = httpx.post(llm.url + "/v1/chat/completions", json=body, timeout=30)
    refused(reply, "chat_template_too_large", "chat_template")
    assert "5000000 characters" in reply.json()["error"]["message"]


def test_the_open_probes_say_up_or_down_only(llm):
    """The OPEA body and /health's message said why the backend was not ready (unreachable, its answer), to anyone:
    that is for the key's holders, at /health/details."""
    opea = httpx.get(llm.url + "/v1/health_check", timeout=30)
    assert opea.status_code == 503 and opea.json() == {"Service Title": "opea_service@llm_vllm/MicroService",
                                                       "Service Description": "OPEA Microservice Infrastructure"}
    health = httpx.get(llm.url + "/health", timeout=30)
    assert health.status_code == 503 and health.json()["error"]["type"] == "unavailable_error"
    assert "unreachable" not in health.text and "backend" not in health.text.lower()
    details = httpx.get(llm.url + "/health/details", timeout=30)
    assert details.status_code == 503 and "unreachable" in details.json()["backend"]
