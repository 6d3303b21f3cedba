"""The LLM microservice's wiring: the lifespan makes the backend client and closes it, and each request routed to
a replica is counted by replica (1, 2, ... in LLM_ENDPOINT's order) with its time to the first byte."""

from __future__ import annotations

import httpx

from ovgenai_services.llm.app import create_app
from ovgenai_services.llm.settings import LLMSettings


async def test_requests_are_counted_by_the_replica_that_served_them():
    answered = httpx.MockTransport(lambda _: httpx.Response(200, json={"choices": []}))
    app = create_app(LLMSettings(llm_endpoint="http://a:8000,http://b:8000"), transport=answered)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            for _ in range(4):
                reply = await http.post("/v1/chat/completions", json={"model": "m", "messages": "hi", "stream": False})
                assert reply.status_code == 200
            metrics = (await http.get("/metrics")).text
        backend = app.state.backend
    counted = [line for line in metrics.splitlines() if line.startswith("opea_llm_replica_requests_total")]
    assert sum(float(line.rsplit(" ", 1)[1]) for line in counted) == 4
    assert 'opea_llm_request_first_byte_seconds_count{path="/v1/chat/completions"} 4.0' in metrics
    assert all(replica.upstream.client.is_closed for replica in backend.replicas)
