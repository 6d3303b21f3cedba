"""Models loaded, reloaded and unloaded while the server runs, on fake engines: a new model loads apart and then
serves, a changed one serves until its new engine is ready and closes once its requests end, a removed one is a 404,
one that cannot load is FAILED with its reason while the rest serve, one that does not fit in memory is refused with
the numbers, an idle one is unloaded and loaded again by the next request, and a repository change is seen."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ovgenai_common.errors import APIError
from ovgenai_server.engine.contract.types import EngineState
from ovgenai_server.lifecycle import Lifecycle, fingerprint
from ovgenai_server.models.registry import ModelRegistry
from ovgenai_server.models.specs import base_spec
from ovgenai_server.settings import BackendSettings
from tests.support.fake_engine import FakeRuntime, fake_model, fake_state
from tests.support.waiting import until


class Repository:
    """The specs a reload reads, and a loader of fake models; `broken` names fail to load, `slow` ones stay
    LOADING until released."""

    def __init__(self, tmp_path):
        self.tmp_path, self.specs, self.loaded = tmp_path, {}, []
        self.broken: set[str] = set()
        self.slow: dict[str, FakeRuntime] = {}

    def spec(self, name: str, **options):
        folder = self.tmp_path / name
        folder.mkdir(exist_ok=True)
        return replace(base_spec(BackendSettings(), name, folder), **options)

    def set(self, *specs) -> None:
        self.specs = {spec.name: spec for spec in specs}

    def resolve(self):
        return list(self.specs.values())

    def load(self, spec, fatal):  # noqa: ARG002 - the fakes fail by raising
        if spec.name in self.broken:
            raise ValueError("tokenizer.json: not a tokenizer")
        runtime = FakeRuntime(pieces=[spec.name], state=EngineState.LOADING if spec.name in self.slow else
                              EngineState.AVAILABLE)
        if spec.name in self.slow:
            self.slow[spec.name] = runtime
        self.loaded.append(spec)
        return fake_model(runtime, name=spec.name)


@pytest.fixture
def repository(tmp_path):
    return Repository(tmp_path)


def lifecycle_of(repository: Repository, *served, **options) -> Lifecycle:
    state = fake_state(*served) if served else fake_state()
    if not served:
        state.models = ModelRegistry()
    return Lifecycle(state, repository.resolve, repository.load, **options)


async def test_a_new_model_loads_apart_and_then_serves(repository):
    lifecycle = lifecycle_of(repository)
    lifecycle.started([])
    repository.slow["fresh"] = None
    repository.set(repository.spec("fresh"))
    assert await lifecycle.reload() == ["fresh"]
    registry = lifecycle.registry
    await until(lambda: "fresh" in repository.slow and repository.slow["fresh"] is not None)
    assert registry.statuses["fresh"].state == "LOADING" and registry.get("fresh") is None
    with pytest.raises(APIError) as loading:
        registry.named("fresh")
    assert loading.value.kind.status == 503
    repository.slow["fresh"].state = EngineState.AVAILABLE
    await lifecycle.settled()
    assert registry.named("fresh").runtime is repository.slow["fresh"] and "fresh" not in registry.statuses
    await lifecycle.close()


async def test_a_changed_model_serves_until_its_new_engine_is_ready_and_closes_when_its_requests_end(repository):
    old = fake_model(FakeRuntime(), name="m")
    lifecycle = lifecycle_of(repository, old)
    first = repository.spec("m")
    lifecycle.started([first])
    ticket = lifecycle.state.share_of(old).admit("client", 1)  # a request of the old version, still running
    repository.set(replace(first, max_num_seqs=8))
    await lifecycle.reload()
    await lifecycle.settled()
    new = lifecycle.registry.named("m")
    assert new is not old and new.runtime is not old.runtime
    await until(lambda: old in lifecycle._retiring)  # retired: it waits for its request, however long it takes
    assert not old.runtime.closed
    ticket.release()
    await until(lambda: old.runtime.closed)
    assert not new.runtime.closed
    await lifecycle.close()


async def test_a_removed_model_is_a_404_and_closes(repository):
    kept, gone = fake_model(FakeRuntime(), name="kept"), fake_model(FakeRuntime(), name="gone")
    lifecycle = lifecycle_of(repository, kept, gone)
    lifecycle.started([repository.spec("kept"), repository.spec("gone")])
    repository.set(repository.spec("kept"))
    assert await lifecycle.reload() == ["gone"]
    await until(lambda: gone.runtime.closed)
    with pytest.raises(APIError) as missing:
        lifecycle.registry.named("gone")
    assert missing.value.kind.status == 404 and lifecycle.registry.named("kept") is kept
    await lifecycle.close()


async def test_a_model_that_cannot_load_fails_with_its_reason_and_the_rest_serve(repository):
    kept = fake_model(FakeRuntime(), name="kept")
    lifecycle = lifecycle_of(repository, kept)
    lifecycle.started([repository.spec("kept")])
    repository.broken.add("broken")
    repository.set(repository.spec("kept"), repository.spec("broken"))
    await lifecycle.reload()
    await lifecycle.settled()
    status = lifecycle.registry.statuses["broken"]
    assert status.state == "FAILED" and "not a tokenizer" in status.message
    with pytest.raises(APIError) as failed:
        lifecycle.registry.named("broken")
    assert "not a tokenizer" in failed.value.message and lifecycle.registry.named("kept") is kept
    await lifecycle.close()


async def test_a_new_version_that_fails_leaves_the_old_one_serving_and_says_why(repository):
    old = fake_model(FakeRuntime(), name="m")
    lifecycle = lifecycle_of(repository, old)
    lifecycle.started([repository.spec("m")])
    repository.broken.add("m")
    repository.set(repository.spec("m", max_num_seqs=8))
    await lifecycle.reload()
    await lifecycle.settled()
    assert lifecycle.registry.named("m") is old and "not a tokenizer" in lifecycle.reload_failures["m"]
    await lifecycle.close()


async def test_a_model_that_does_not_fit_in_memory_is_refused_with_the_numbers(repository):
    lifecycle = lifecycle_of(repository)
    lifecycle.started([])
    repository.set(repository.spec("huge", cache_size=1_000_000.0))  # a million GB of KV cache
    await lifecycle.reload()
    await lifecycle.settled()
    message = lifecycle.registry.statuses["huge"].message
    assert "GiB" in message and "available" in message and repository.loaded == []
    await lifecycle.close()


async def test_an_unreadable_repository_changes_nothing(repository):
    kept = fake_model(FakeRuntime(), name="kept")
    lifecycle = lifecycle_of(repository, kept)
    lifecycle.started([repository.spec("kept")])

    def unreadable():
        raise ValueError("'config.json' is not valid JSON")

    lifecycle._resolve = unreadable
    with pytest.raises(APIError) as refused:
        await lifecycle.reload()
    assert refused.value.kind.status == 400 and lifecycle.registry.named("kept") is kept
    await lifecycle.close()


async def test_an_idle_model_is_unloaded_and_the_next_request_loads_it_again(repository):
    model = fake_model(FakeRuntime(), name="m")
    lifecycle = lifecycle_of(repository, model, idle_unload_s=0.2)
    lifecycle.started([repository.spec("m")])
    await until(lambda: model.runtime.closed)
    assert lifecycle.registry.statuses["m"].state == "UNLOADED" and lifecycle.registry.get("m") is None
    await lifecycle.registry.awake("m")
    assert lifecycle.registry.named("m").runtime is not model.runtime and repository.loaded[-1].name == "m"
    await lifecycle.close()


async def test_a_repository_change_is_seen_by_the_watch(repository, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"mediapipe_config_list": []}))
    lifecycle = lifecycle_of(repository, config=config, poll_seconds=0.05)
    lifecycle.started([])
    repository.set(repository.spec("added"))
    config.write_text(json.dumps({"mediapipe_config_list": [{"name": "added"}]}))
    await until(lambda: lifecycle.registry.get("added") is not None)
    await lifecycle.close()


def test_a_repository_fingerprint_changes_with_its_graphs(tmp_path):
    config = tmp_path / "config.json"
    config.write_text("{}")
    (tmp_path / "m").mkdir()
    before = fingerprint(config)
    (tmp_path / "m" / "graph.pbtxt").write_text("node {}")
    assert fingerprint(config) != before and fingerprint(None) == ()
