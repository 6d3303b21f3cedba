"""No client takes the gateway from the others: JSON bodies stay within the JSON limit and the shared JSON rules
whatever their encoding or Content-Type headers, and OPEA's chat_template cannot ask for a prompt larger than a
request.

Its LLM and embedding services are addresses nobody listens on: every request here is refused before a call."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.servers import RemoteServer, free_port


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    nowhere = f"http://127.0.0.1:{free_port()}"
    env = {"EMBEDDING_SERVER_ENDPOINT": nowhere, "LLM_SERVER_ENDPOINT": nowhere,
           "DATA_DIR": str(tmp_path_factory.mktemp("gateway-data"))}
    with RemoteServer("microservices.gateway", env=env, health_path="/live") as server:
        yield server


def refused(reply: httpx.Response, code: str, param: str | None = None) -> None:
    assert reply.status_code == 400, (reply.status_code, reply.text[:300])
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == code, error
    assert param is None or error["param"] == param, error


def test_a_json_body_past_the_json_limit_is_refused_whatever_the_headers(gateway):
    """JSON then text/plain: the gate counted it as an upload (64 MiB), FastAPI parsed it as JSON (limit 4 MiB)."""
    big = json.dumps({"messages": "x" * (5 * 1024 * 1024)}).encode()
    for headers in ([("Content-Type", "application/json"), ("Content-Type", "text/plain")],
                    [("Content-Type", "text/plain"), ("Content-Type", "application/json")]):
        refused(httpx.post(gateway.url + "/v1/chatqna", content=big, headers=headers, timeout=60),
                "content_type_repeated")
    reply = httpx.post(gateway.url + "/v1/chatqna", content=big, headers={"Content-Type": "application/json"})
    assert reply.status_code == 413


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_json_in_another_encoding_is_400(gateway, encoding):
    body = json.dumps({"messages": "hi \ud800", "stream": False}).encode(encoding)
    reply = httpx.post(gateway.url + "/v1/chatqna", content=body, headers={"Content-Type": "application/json"})
    refused(reply, "json_not_utf8")


def test_a_chat_template_cannot_fill_a_prompt_larger_than_a_request(gateway):
    """A 28 KB request made a 5.2 MB prompt before anything refused it."""
    body = {"messages": "q" * 5_000, "chat_template": "{question}" * 1_000, "stream": False}
    reply = httpx.post(gateway.url + "/v1/chatqna", json=body, timeout=30)
    refused(reply, "chat_template_too_large", "chat_template")


def test_a_lone_surrogate_in_a_json_form_field_is_400(gateway):
    """OPEA's link_list is JSON inside a form: a link holding \\ud800 was a 500 where it became a URL."""
    reply = httpx.post(gateway.url + "/v1/dataprep/ingest", data={"link_list": '["http://127.0.0.1:9/\\ud800"]'},
                       timeout=30)
    refused(reply, "invalid_json", "link_list")
