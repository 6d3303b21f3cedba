"""The backend replicas named by LLM_ENDPOINT (OPEA's vLLM_ENDPOINT too): one or several base URLs, comma-separated,
at least one."""

from __future__ import annotations

import pydantic
import pytest

from ovgenai_services.llm.settings import LLMSettings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ("LLM_ENDPOINT", "vLLM_ENDPOINT", "LLM_ROUTING"):
        monkeypatch.delenv(name, raising=False)


def test_endpoints_are_the_comma_separated_urls(monkeypatch):
    monkeypatch.setenv("LLM_ENDPOINT", " http://a:8000 ,http://b:8000/v1,, ")
    assert LLMSettings().endpoints == ["http://a:8000", "http://b:8000/v1"]
    monkeypatch.delenv("LLM_ENDPOINT")
    monkeypatch.setenv("vLLM_ENDPOINT", "http://vllm:80")  # OPEA's name
    assert LLMSettings().endpoints == ["http://vllm:80"]


@pytest.mark.parametrize("value", ["", " , ,"])
def test_no_endpoint_is_refused(value):
    with pytest.raises(pydantic.ValidationError, match="name at least one backend URL"):
        LLMSettings(llm_endpoint=value)


def test_routing_is_prefix_unless_round_robin_is_asked(monkeypatch):
    assert LLMSettings().routing == "prefix"
    monkeypatch.setenv("LLM_ROUTING", "round_robin")
    assert LLMSettings().routing == "round_robin"
    monkeypatch.setenv("LLM_ROUTING", "random")
    with pytest.raises(pydantic.ValidationError):
        LLMSettings()
