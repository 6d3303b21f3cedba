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


def test_a_server_seed_seeds_requests_that_set_none_in_order():
    """vLLM's --seed: two runs of the same requests draw the same seeds; a request's own seed is its own."""
    from ovgenai_server.api.protocol import ChatCompletionRequest

    request = ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}])
    runs = [fake_state(), fake_state()]
    for state in runs:
        state.seed = 7
    drawn = [[state.seeded(request).seed for _ in range(3)] for state in runs]
    assert drawn[0] == drawn[1] and len(set(drawn[0])) == 3 and None not in drawn[0]
    assert runs[0].seeded(request.model_copy(update={"seed": 5})).seed == 5
    assert fake_state().seeded(request).seed is None  # no server seed: the engine's own randomness
