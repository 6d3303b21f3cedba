"""The backend's routes on a fake engine: an engine failure and a loading engine as statuses, the probes (OVMS's,
KServe's and the watchdog behind readiness), the API key, the 429s of admission and the models' list. Each API's own
answers over HTTP are in tests/ovgenai_server/api/."""

from __future__ import annotations

import asyncio

import httpx

from ovgenai_common.health import LOADING
from ovgenai_server.app import create_app
from ovgenai_server.engine.contract.types import EngineState
from ovgenai_server.settings import BackendSettings
from tests.support.fake_engine import FakePrompts, FakeRuntime, fake_model, make_client
from tests.support.waiting import until

MESSAGES = [{"role": "user", "content": "hi there"}]


async def test_unary_engine_failure_is_503():
    async with make_client(FakeRuntime(fail_after=0)) as client:
        response = await client.post("/v1/chat/completions", json={"messages": MESSAGES})
    assert response.status_code == 503
    assert response.json()["error"]["type"] == "unavailable_error"


async def test_loading_engine_gives_503_and_health_503():
    engine = FakeRuntime(state=EngineState.LOADING)
    async with make_client(engine) as client:
        assert (await client.post("/v1/chat/completions", json={"messages": MESSAGES})).status_code == 503
        health = await client.get("/health")  # open: loading, up or down, no more
        assert health.status_code == 503 and health.headers["Retry-After"] == "5"
        assert health.json()["error"] == {"message": LOADING, "type": "unavailable_error", "param": None,
                                          "code": 503}
        details = await client.get("/health/details")  # behind the key (none set here): why, and each model
        assert details.status_code == 503 and details.json()["reason"] == "fake-model: Loading model"
        assert details.json()["Models"] == {"fake-model": "LOADING"}
        config = (await client.get("/v1/config")).json()
        assert config["fake-model"]["model_version_status"][0]["state"] == "LOADING"
        # KServe's probes, as OVMS answers them: alive while loading, not ready.
        assert (await client.get("/v2/health/live")).status_code == 200
        assert (await client.get("/v2/health/ready")).status_code == 503
    async with make_client(FakeRuntime()) as client:
        assert (await client.get("/v2/health/ready")).status_code == 200


async def test_models_endpoint_and_single_model_default():
    async with make_client(FakeRuntime()) as client:
        models = (await client.get("/v3/models")).json()
        one = await client.get("/v1/models/fake-model")
    assert models["data"][0]["id"] == "fake-model" and one.status_code == 200


async def test_api_key_middleware():
    async with make_client(FakeRuntime(), api_key="k") as client:
        assert (await client.get("/v1/models")).status_code == 401
        assert (await client.get("/v1/models", headers={"Authorization": "Bearer k"})).status_code == 200
        assert (await client.get("/health")).status_code == 200


async def test_a_request_expected_to_wait_past_max_queue_wait_is_429_with_the_seconds_to_wait():
    engine = FakeRuntime()
    engine.wait_per_token = 10.0  # a prompt token costs ten seconds of queue (the fake tokenizer: one per word)
    async with make_client(engine, max_queue_wait=25) as client:
        assert (await client.post("/v1/chat/completions", json={"messages": MESSAGES})).status_code == 200  # idle
        engine.active = 1  # another request in flight
        refused = await client.post("/v1/chat/completions", json={"messages": MESSAGES})
        words = len(FakePrompts().render(MESSAGES, None, True, None).split())
        assert refused.status_code == 429 and refused.headers["retry-after"] == str(words * 10 - 25)
        assert "max_queue_wait" in refused.json()["error"]["message"]
    async with make_client(engine, max_queue_wait=0) as client:  # 0: no wait limit
        assert (await client.post("/v1/chat/completions", json={"messages": MESSAGES})).status_code == 200
    engine.wait_per_token = None  # the rate unknown (autotune off): never refused for time
    async with make_client(engine, max_queue_wait=25) as client:
        assert (await client.post("/v1/chat/completions", json={"messages": MESSAGES})).status_code == 200


async def test_capacity_limit_is_429_sized_on_the_models_own_batch():
    # max_num_seqs 2, as a model's graph.pbtxt may set it, below the server-wide default: 2 + 1 places
    model = fake_model(max_num_seqs=2)
    app = create_app(BackendSettings(max_num_seqs=256, max_waiting_requests=1), [model])
    app.state.server.share_of(model).held["address:10.0.0.9"] = 3  # another client holds them all
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        response = await client.post("/v1/chat/completions", json={"messages": MESSAGES})
    assert response.status_code == 429 and "3 sequences in flight" in response.json()["error"]["message"]


async def test_a_stuck_admission_fails_readiness_with_the_reason_and_is_counted():
    """The watchdog (request/fair_share.py) behind /health: requests wait, the engine has room, none is let in."""
    model = fake_model()
    app = create_app(BackendSettings(), [model])
    share = app.state.server.share_of(model)
    share.stall_seconds, share.max_running = 0, 1  # one request in the engine fills it
    entered = asyncio.Event()

    async def hold(client: str) -> None:
        ticket = share.admit(client, 1)
        async with share.turn(ticket, 1, [1]):
            entered.set()
            await asyncio.Event().wait()

    holders = [asyncio.create_task(hold("a"))]
    await entered.wait()
    holders.append(asyncio.create_task(hold("b")))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        await until(lambda: share.queued == 1)
        assert (await client.get("/health")).status_code == 200  # waiting for room is no fault
        assert share._poller is not None
        share._poller.cancel()  # as an exception would end it
        share.max_running = 2  # room, and nothing to see it
        details = await client.get("/health/details")
        assert details.status_code == 503 and "admission stalled" in details.json()["reason"]
        metrics = (await client.get("/metrics")).text
        assert 'ovgenai:admission_stalls_total{model_name="fake-model"} 1.0' in metrics
        assert share.queued == 0 and (await client.get("/health")).status_code == 200  # the rebuilt line moved
    for task in holders:
        task.cancel()
    await asyncio.gather(*holders, return_exceptions=True)
