"""The backend's state (state.py): each model's places shared between clients, sized on its own batch, kept while
it is served and made anew for a model loaded again."""

from __future__ import annotations

from ovgenai_server.models.registry import ModelRegistry
from tests.support.fake_engine import FakeRuntime, fake_model, fake_state


def test_each_model_has_its_places_sized_on_its_own_batch():
    state = fake_state(max_waiting_requests=10)
    small = fake_model(max_num_seqs=2, name="small")
    share = state.share_of(small)
    assert share.capacity == 12 and share is state.share_of(small)
    assert state.queued("small") == 0 and state.queued("never-served") == 0
    reloaded = fake_model(FakeRuntime(), max_num_seqs=2, name="small")  # the same name on a runtime of its own
    assert state.share_of(reloaded) is not share and isinstance(state.models, ModelRegistry)
