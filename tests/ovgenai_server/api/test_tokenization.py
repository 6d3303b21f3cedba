"""vLLM's tokenizer routes on a fake engine: /tokenizer_info says the model's special tokens, template and length."""

from __future__ import annotations

from tests.support.fake_engine import FACTS, FakePrompts, FakeRuntime, make_client


async def test_tokenizer_info_is_the_models_special_tokens_template_and_length():
    async with make_client(FakeRuntime()) as client:
        info = (await client.get("/tokenizer_info")).json()
        named = (await client.get("/tokenizer_info", params={"model": FACTS.name})).json()
        unknown = await client.get("/tokenizer_info", params={"model": "nope"})
    assert info == named == {**FakePrompts().tokenizer_config(), "model_max_length": FACTS.max_context}
    assert unknown.status_code == 404 and unknown.json()["error"]["param"] == "model"
