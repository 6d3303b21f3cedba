"""The backend through the official `openai` client and LangChain, on the real engine and default model."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def client(backend):
    return openai.OpenAI(base_url=backend.url + "/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def client_v3(backend):
    return openai.OpenAI(base_url=backend.url + "/v3", api_key="unused", max_retries=0)


def test_models_lists_the_default_model(client, default_model):
    assert [m.id for m in client.models.list().data] == [default_model]


def test_health_and_ovms_config(backend, default_model):
    assert httpx.get(backend.url + "/health").json() == {"status": "ok"}
    config = httpx.get(backend.url + "/v1/config").json()
    assert config[default_model]["model_version_status"][0]["state"] == "AVAILABLE"


def test_chat_unary_answers_and_counts_usage(client, default_model):
    response = client.chat.completions.create(model=default_model, messages=QUESTION, max_tokens=20, temperature=0)
    choice = response.choices[0]
    assert "Paris" in choice.message.content
    assert choice.finish_reason == "stop"
    assert response.usage.prompt_tokens > 10
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens
    assert response.id.startswith("chatcmpl-") and response.model == default_model


def test_v3_prefix_serves_the_same_api(client_v3, default_model):
    response = client_v3.chat.completions.create(
        model=default_model, messages=QUESTION, max_tokens=20, temperature=0
    )
    assert "Paris" in response.choices[0].message.content


def test_greedy_output_equals_llm_pipeline(client, default_model):
    import openvino_genai

    from microservices.common.cpu import default_properties
    from tests.support.servers import MODELS

    # The same OpenVINO properties the server uses (f32 on CPUs without AMX), so that greedy outputs compare.
    gguf = str(MODELS / default_model / "model.gguf")
    pipeline = openvino_genai.LLMPipeline(gguf, "CPU", **default_properties("CPU"))
    question = "Write one sentence about the sea."
    config = openvino_genai.GenerationConfig(max_new_tokens=24)
    expected_chat = str(pipeline.generate(question, config))  # LLMPipeline applies the chat template
    served_chat = client.chat.completions.create(
        model=default_model, messages=[{"role": "user", "content": question}], max_tokens=24, temperature=0
    )
    assert served_chat.choices[0].message.content == expected_chat

    config.apply_chat_template = False
    prompt = "The three largest oceans on Earth are"
    expected_raw = str(pipeline.generate(prompt, config))
    served_raw = client.completions.create(model=default_model, prompt=prompt, max_tokens=24, temperature=0)
    assert served_raw.choices[0].text == expected_raw and expected_raw


def test_length_finish_reason(client, default_model):
    response = client.chat.completions.create(model=default_model, messages=QUESTION, max_tokens=3, temperature=0)
    assert response.choices[0].finish_reason == "length"
    assert response.usage.completion_tokens == 3


def test_stream_contract(client, default_model):
    stream = client.chat.completions.create(
        model=default_model, messages=QUESTION, max_tokens=20, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role is None for c in chunks[1:] if c.choices)
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and not finals[0].choices[0].delta.content
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "Paris" in text
    assert len({c.id for c in chunks}) == 1


def test_stream_ends_with_done_line(backend, default_model):
    body = {"model": default_model, "messages": QUESTION, "max_tokens": 5, "stream": True}
    with httpx.stream("POST", backend.url + "/v1/chat/completions", json=body, timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    assert all(line.startswith("data: ") for line in lines)


def test_completions_unary_stream_and_batch(client, default_model):
    unary = client.completions.create(
        model=default_model, prompt="The capital of France is", max_tokens=5, temperature=0
    )
    streamed = "".join(
        c.choices[0].text
        for c in client.completions.create(
            model=default_model, prompt="The capital of France is", max_tokens=5, temperature=0, stream=True
        )
    )
    assert unary.choices[0].text == streamed and "Paris" in streamed
    batch = client.completions.create(model=default_model, prompt=["One", "Two"], max_tokens=4, temperature=0)
    assert sorted(c.index for c in batch.choices) == [0, 1]


def test_echo_prepends_the_prompt(client, default_model):
    response = client.completions.create(
        model=default_model, prompt="The capital of France is", max_tokens=3, temperature=0, echo=True
    )
    assert response.choices[0].text.startswith("The capital of France is")


def test_stop_string_ends_generation_before_it(client, default_model):
    response = client.chat.completions.create(
        model=default_model, messages=QUESTION, max_tokens=30, temperature=0, stop=["Paris"]
    )
    assert "Paris" not in response.choices[0].message.content
    assert response.choices[0].finish_reason == "stop"


def test_seed_reproducibility_and_n(client, default_model):
    def sample(seed):
        return client.chat.completions.create(
            model=default_model, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=16,
            temperature=1.0, seed=seed, n=2,
        )

    first, second = sample(1234), sample(1234)
    assert len(first.choices) == 2
    assert [c.message.content for c in first.choices] == [c.message.content for c in second.choices]


def test_best_of_beam_search(client, default_model):
    response = client.completions.create(
        model=default_model, prompt="The capital of France is", max_tokens=6, n=1, best_of=2, temperature=0
    )
    assert len(response.choices) == 1 and response.choices[0].text


def test_logprobs_for_chosen_tokens(client, default_model):
    response = client.chat.completions.create(
        model=default_model, messages=QUESTION, max_tokens=5, temperature=0, logprobs=True
    )
    content = response.choices[0].logprobs.content
    assert len(content) == 5
    assert all(entry.logprob <= 0 for entry in content)
    assert "".join(entry.token for entry in content) == response.choices[0].message.content


def test_json_object_response_format(client, default_model):
    response = client.chat.completions.create(
        model=default_model,
        messages=[{"role": "user", "content": "Reply with a JSON object whose key 'answer' is 'yes'."}],
        max_tokens=100, temperature=0, response_format={"type": "json_object"}, frequency_penalty=1.0,
    )
    choice = response.choices[0]
    if choice.finish_reason == "length":  # the grammar keeps every prefix valid; only a finished object parses
        assert choice.message.content.lstrip().startswith("{")
    else:
        assert isinstance(json.loads(choice.message.content), dict)


def test_json_schema_response_format(client, default_model):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
              "additionalProperties": False}
    response = client.chat.completions.create(
        model=default_model, messages=QUESTION, max_tokens=40, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
    )
    assert set(json.loads(response.choices[0].message.content)) == {"city"}


def test_tools_refused_when_template_has_none(client, default_model):
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model=default_model, messages=QUESTION, tools=[tool])
    assert "tools" in str(error.value)


def test_content_parts_and_system_role(client, default_model):
    response = client.chat.completions.create(
        model=default_model,
        messages=[
            {"role": "system", "content": "You answer in one word."},
            {"role": "user", "content": [{"type": "text", "text": "What is the capital of France?"}]},
        ],
        max_tokens=10, temperature=0,
    )
    assert "Paris" in response.choices[0].message.content


def test_langchain_chat_openai(backend, default_model):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=backend.url + "/v1", api_key="unused", model=default_model, temperature=0,
                     max_tokens=20)
    assert "Paris" in llm.invoke("What is the capital of France?").content
    streamed = "".join(chunk.content for chunk in llm.stream("What is the capital of France?"))
    assert "Paris" in streamed
