"""The LLM microservice in front of two real backend replicas (LLM_ENDPOINT with two URLs): requests that share a
system prompt are all served by one replica, where it is cached; other prompts spread over both; and when a replica
dies, its requests are served by the other while the service stays healthy."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.ovgenai_server.system.helpers import metric
from tests.support.servers import MODELS, RemoteServer

SYSTEM = ("You answer questions about the Moonwick canal, which is 42 kilometres long, has seven locks, and opens at "
          "dawn every day of the year except the first of January. ") * 3
SERVED = "ovgenai:e2e_request_latency_seconds_count"


@pytest.fixture(scope="module")
def replicas(default_model):  # noqa: ARG001 - needs the default model prepared
    with RemoteServer("ovgenai_server", ["--model", str(MODELS)]) as first, \
            RemoteServer("ovgenai_server", ["--model", str(MODELS)]) as second:
        yield [first, second]


@pytest.fixture(scope="module")
def routed(replicas, default_model):
    env = {"LLM_ENDPOINT": f"{replicas[0].url}, {replicas[1].url}", "LLM_MODEL": default_model}
    with RemoteServer("ovgenai_services.llm", env=env, health_path="/v1/health_check") as server:
        yield server


def served(replicas) -> list[float]:
    return [metric(replica.url, SERVED) for replica in replicas]


def ask(routed, model: str, system: str, question: str, stream: bool = False) -> str:
    client = openai.OpenAI(base_url=routed.url + "/v1", api_key="unused", max_retries=0)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    if stream:
        return "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
            model=model, messages=messages, max_tokens=4, stream=True) if chunk.choices)
    return client.chat.completions.create(model=model, messages=messages, max_tokens=4).choices[0].message.content


def test_a_shared_system_prompt_is_served_by_one_replica(replicas, routed, default_model):
    before = served(replicas)
    for i in range(6):
        ask(routed, default_model, SYSTEM, f"Question {i}: how many locks?", stream=i % 2 == 1)
    grew = [after - was for after, was in zip(served(replicas), before, strict=True)]
    assert sorted(grew) == [0, 6], grew


def test_different_prompts_spread_over_both_replicas(replicas, routed, default_model):
    before = served(replicas)
    for i in range(12):
        ask(routed, default_model, f"You are assistant number {i}.", "Say hello.")
    grew = [after - was for after, was in zip(served(replicas), before, strict=True)]
    assert sum(grew) == 12 and min(grew) > 0, grew
    counted = httpx.get(routed.url + "/metrics").text
    assert 'opea_llm_replica_requests_total{replica="1"}' in counted
    assert 'opea_llm_replica_requests_total{replica="2"}' in counted


def test_a_dead_replica_is_routed_around_and_the_service_stays_ready(replicas, routed, default_model):
    before = served(replicas)
    ask(routed, default_model, SYSTEM, "Which day is it closed?")
    favoured = [after - was for after, was in zip(served(replicas), before, strict=True)].index(1)
    replicas[favoured].process.kill()
    replicas[favoured].process.wait()
    other = replicas[1 - favoured]
    before_other = metric(other.url, SERVED)
    for i in range(3):
        assert ask(routed, default_model, SYSTEM, f"Question {i} after the replica died.", stream=i == 1)
    assert metric(other.url, SERVED) - before_other == 3
    assert httpx.get(routed.url + "/health").status_code == 200
    assert httpx.get(routed.url + "/v1/health_check").status_code == 200
