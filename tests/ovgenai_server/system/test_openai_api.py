"""The backend through the official `openai` client and LangChain, on the real engine and default model.

Answers are compared with what in-process LLMPipeline computes on the same machine and precision, never with one
model's words: numerics (and so words) differ between CPUs with and without AMX."""

from __future__ import annotations

import json
from functools import cache

import httpx
import pytest
from pydantic import BaseModel

from ovgenai_common.cpu import default_properties
from ovgenai_server.settings import BackendSettings
from tests.support.servers import MODELS

QUESTION_TEXT = "What is the capital of France?"
QUESTION = [{"role": "user", "content": QUESTION_TEXT}]


@pytest.fixture(scope="module")
def client_v3(backend):
    return backend.openai_client("/v3")


@pytest.fixture(scope="module")
def pipeline(default_model):
    """In-process LLMPipeline with the server's OpenVINO properties."""
    import openvino_genai

    # The precision the server resolves (INFERENCE_PRECISION from the environment, auto by default).
    properties = default_properties("CPU", precision=BackendSettings().inference_precision)
    return openvino_genai.LLMPipeline(str(MODELS / default_model), "CPU", **properties)


@pytest.fixture(scope="module")
def reference(pipeline):
    """Greedy text from the in-process pipeline; chat template unless raw."""
    import openvino_genai

    @cache
    def greedy(text: str, max_tokens: int, raw: bool = False) -> str:
        config = openvino_genai.GenerationConfig(max_new_tokens=max_tokens)
        config.apply_chat_template = not raw
        return str(pipeline.generate(text, config))

    return greedy


def test_models_lists_the_default_model(client, default_model):
    assert [m.id for m in client.models.list().data] == [default_model]


def test_health_and_ovms_config(backend, default_model):
    assert httpx.get(backend.url + "/health").json() == {"status": "ok"}
    config = httpx.get(backend.url + "/v1/config").json()
    assert config[default_model]["model_version_status"][0]["state"] == "AVAILABLE"


def test_chat_unary_answers_and_counts_usage(client, default_model, reference):
    response = client.chat.completions.create(model=default_model, messages=QUESTION, max_tokens=20, temperature=0)
    choice = response.choices[0]
    assert choice.message.content == reference(QUESTION_TEXT, 20)
    assert choice.finish_reason in ("stop", "length")
    assert response.usage.prompt_tokens > 10
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens
    assert response.id.startswith("chatcmpl-") and response.model == default_model


def test_v3_prefix_serves_the_same_api(client_v3, default_model, reference):
    response = client_v3.chat.completions.create(
        model=default_model, messages=QUESTION, max_tokens=20, temperature=0
    )
    assert response.choices[0].message.content == reference(QUESTION_TEXT, 20)


def test_greedy_output_equals_llm_pipeline(client, default_model, reference):
    question = "Write one sentence about the sea."
    served_chat = client.chat.completions.create(
        model=default_model, messages=[{"role": "user", "content": question}], max_tokens=24, temperature=0
    )
    assert served_chat.choices[0].message.content == reference(question, 24)

    prompt = "The three largest oceans on Earth are"
    served_raw = client.completions.create(model=default_model, prompt=prompt, max_tokens=24, temperature=0)
    assert served_raw.choices[0].text == reference(prompt, 24, raw=True) and served_raw.choices[0].text


def test_length_finish_reason(client, default_model):
    response = client.chat.completions.create(model=default_model, messages=QUESTION, max_tokens=3, temperature=0)
    assert response.choices[0].finish_reason == "length"
    assert response.usage.completion_tokens == 3


def test_stream_contract(client, default_model, reference):
    stream = client.chat.completions.create(
        model=default_model, messages=QUESTION, max_tokens=20, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content  # with text
    assert all(c.choices[0].delta.role is None for c in chunks[1:] if c.choices)
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and not finals[0].choices[0].delta.content
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == reference(QUESTION_TEXT, 20)
    assert len({c.id for c in chunks}) == 1


def test_stream_ends_with_done_line(backend, default_model):
    body = {"model": default_model, "messages": QUESTION, "max_tokens": 5, "stream": True}
    with httpx.stream("POST", backend.url + "/v1/chat/completions", json=body, timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    assert all(line.startswith("data: ") for line in lines)


def test_completions_unary_stream_and_batch(client, default_model, reference):
    unary = client.completions.create(
        model=default_model, prompt="The capital of France is", max_tokens=5, temperature=0
    )
    streamed = "".join(
        c.choices[0].text
        for c in client.completions.create(
            model=default_model, prompt="The capital of France is", max_tokens=5, temperature=0, stream=True
        )
    )
    assert unary.choices[0].text == streamed == reference("The capital of France is", 5, raw=True)
    batch = client.completions.create(model=default_model, prompt=["One", "Two"], max_tokens=4, temperature=0)
    assert sorted(c.index for c in batch.choices) == [0, 1]


def test_echo_prepends_the_prompt(client, default_model):
    response = client.completions.create(
        model=default_model, prompt="The capital of France is", max_tokens=3, temperature=0, echo=True
    )
    assert response.choices[0].text.startswith("The capital of France is")


def test_stop_string_ends_generation_before_it(client, default_model, reference):
    unstopped = reference(QUESTION_TEXT, 30)
    words = unstopped.split()
    assert len(words) >= 3, unstopped
    stop = words[len(words) // 2]
    response = client.chat.completions.create(
        model=default_model, messages=QUESTION, max_tokens=30, temperature=0, stop=[stop]
    )
    content = response.choices[0].message.content
    assert stop not in content and response.choices[0].finish_reason == "stop"
    assert unstopped.startswith(content) and unstopped[len(content):].lstrip().startswith(stop)


@pytest.mark.parametrize("stream", [False, True])
def test_stop_strings_inside_tokens_cut_the_text_where_they_begin(client, default_model, stream):
    """The engine removes whole tokens: a stop string ending inside one stayed in the text ("swer" left "The
    answer"), and one beginning inside one took the token's text before it (the space of " Paris")."""
    prompt = "The capital of France is"

    def complete(**stop):
        if not stream:
            choice = client.completions.create(model=default_model, prompt=prompt, max_tokens=16, temperature=0,
                                               **stop).choices[0]
            return choice.text, choice.finish_reason
        chunks = list(client.completions.create(model=default_model, prompt=prompt, max_tokens=16, temperature=0,
                                                stream=True, **stop))
        return "".join(c.choices[0].text for c in chunks if c.choices), chunks[-1].choices[0].finish_reason

    text, _ = complete()
    words = text.split()
    assert len(words) >= 3 and all(len(word) >= 3 for word in words[1:3]), text
    inside = words[1][1:] + " " + words[2][:-1]  # begins and ends inside a word
    for stop in (inside, words[1], words[2][1:]):
        assert complete(stop=[stop]) == (text[:text.index(stop)], "stop"), stop


@pytest.mark.parametrize("stream", [False, True])
def test_a_stop_string_ending_in_whitespace_is_cut_and_named(client, default_model, stream):
    """openvino_genai cuts a stop string's trailing whitespace off with the token after it, so the text never held
    " " or "is " and no stop_reason named them; the request is ended where the string begins, as vLLM ends it."""
    prompt = "The capital of France is"

    def complete(**stop):
        if not stream:
            choice = client.completions.create(model=default_model, prompt=prompt, max_tokens=16, temperature=0,
                                               **stop).choices[0]
            return choice.text, choice.finish_reason, choice.model_extra.get("stop_reason")
        chunks = list(client.completions.create(model=default_model, prompt=prompt, max_tokens=16, temperature=0,
                                                stream=True, **stop))
        last = chunks[-1].choices[0]
        return ("".join(c.choices[0].text for c in chunks if c.choices), last.finish_reason,
                last.model_extra.get("stop_reason"))

    text, _, unstopped = complete()
    words = text.split()
    assert len(words) >= 3 and unstopped is None, text
    for stop in (" ", words[1] + " "):
        assert complete(stop=[stop]) == (text[:text.index(stop)], "stop", stop), stop


def test_min_tokens_holds_off_the_end_of_sequence_and_stop_strings(client, default_model):
    """vLLM's min_tokens: a greedy answer that ended goes on to at least that many tokens, and a stop string that
    ended it early counts only after them."""
    def ask(**fields):
        return client.chat.completions.create(model=default_model, messages=QUESTION, temperature=0, **fields)

    ended = ask(max_tokens=200)
    tokens = ended.usage.completion_tokens
    assert ended.choices[0].finish_reason == "stop" and tokens < 190, tokens
    longer = ask(max_tokens=tokens + 10, extra_body={"min_tokens": tokens + 5})
    assert longer.usage.completion_tokens >= tokens + 5
    early = ask(max_tokens=40, stop=[" "])
    later = ask(max_tokens=40, stop=[" "], extra_body={"min_tokens": early.usage.completion_tokens + 3})
    assert later.usage.completion_tokens >= early.usage.completion_tokens + 3
    assert " " in later.choices[0].message.content  # spaces before min_tokens did not end it


def test_n_choices_and_seeds_sample_differently(client, default_model):
    """Same-seed reproduction is tested where it is guaranteed: prefix caching off (test_precision_and_seed)."""

    def sample(seed):
        response = client.chat.completions.create(
            model=default_model, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=16,
            temperature=1.0, seed=seed, n=2,
        )
        return [c.message.content for c in sorted(response.choices, key=lambda c: c.index)]

    first = sample(1234)
    assert len(first) == 2 and first[0] != first[1]
    assert sample(4321) != first


def test_best_of_beam_search(client, default_model, pipeline):
    """best_of is the beam width: the n best beams come back, best first, as LLMPipeline's beam search finds them
    (greedy decoding could not give two different answers at temperature 0)."""
    import openvino_genai

    prompt = "The capital of France is"
    config = openvino_genai.GenerationConfig(max_new_tokens=6, num_beams=4, num_beam_groups=1,
                                             num_return_sequences=2)
    config.apply_chat_template = False
    beams = list(pipeline.generate(prompt, config).texts)
    response = client.completions.create(model=default_model, prompt=prompt, max_tokens=6, n=2, best_of=4,
                                         temperature=0)
    served = [c.text for c in sorted(response.choices, key=lambda c: c.index)]
    assert served == beams and served[0] != served[1]
    best = client.completions.create(model=default_model, prompt=prompt, max_tokens=6, best_of=4, temperature=0)
    assert [c.text for c in best.choices] == beams[:1]


def test_logprobs_for_chosen_tokens(client, default_model):
    response = client.chat.completions.create(
        model=default_model, messages=QUESTION, max_tokens=5, temperature=0, logprobs=True
    )
    content = response.choices[0].logprobs.content
    assert len(content) == 5
    assert all(entry.logprob <= 0 for entry in content)
    assert "".join(entry.token for entry in content) == response.choices[0].message.content


def test_the_one_alternative_is_the_chosen_token(client, default_model):
    """top_logprobs 1: the engine scores the chosen token only, listed as its own alternative (as OVMS lists it)."""
    response = client.chat.completions.create(model=default_model, messages=QUESTION, max_tokens=5, temperature=0,
                                              logprobs=True, top_logprobs=1)
    content = response.choices[0].logprobs.content
    assert len(content) == 5
    assert all([(top.token, top.logprob) for top in entry.top_logprobs] == [(entry.token, entry.logprob)]
               for entry in content)


def test_a_stream_sends_each_tokens_log_probability_once(client, default_model):
    """The end token adds no text: its log probability still goes out (with the last chunk), as in a unary answer."""
    stream = client.chat.completions.create(model=default_model, messages=QUESTION, max_tokens=96, temperature=0,
                                            logprobs=True, stream=True, stream_options={"include_usage": True})
    values, usage, reasons = [], None, []
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            values += [entry.logprob for entry in (choice.logprobs.content if choice.logprobs else None) or []]
            reasons += [choice.finish_reason] if choice.finish_reason else []
    assert usage is not None and len(values) == usage.completion_tokens, (reasons, len(values), usage)


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


class Capital(BaseModel):
    city: str


def test_parse_gives_the_pydantic_model(client, default_model):
    """The SDK's structured output helper: a strict json_schema from the class, the answer parsed into it."""
    response = client.chat.completions.parse(model=default_model, messages=QUESTION, max_tokens=40, temperature=0,
                                             response_format=Capital)
    message = response.choices[0].message
    assert isinstance(message.parsed, Capital) and message.parsed == Capital.model_validate_json(message.content)


def test_content_parts_and_system_role(client, default_model):
    def answer(content, system="You answer in one word."):
        messages = [{"role": "system", "content": system}, {"role": "user", "content": content}]
        response = client.chat.completions.create(model=default_model, messages=messages, max_tokens=10,
                                                  temperature=0)
        return response.choices[0].message.content

    parts = [{"type": "text", "text": "What is the capital "}, {"type": "text", "text": "of France?"}]
    as_parts = answer(parts)
    assert as_parts and as_parts == answer(QUESTION_TEXT)  # text parts are joined into one message
    assert as_parts != answer(QUESTION_TEXT, system="You answer in French, at length.")  # the system role counts


def test_langchain_chat_openai(backend, default_model, reference):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=backend.url + "/v1", api_key="unused", model=default_model, temperature=0,
                     max_tokens=20)
    assert llm.invoke(QUESTION_TEXT).content == reference(QUESTION_TEXT, 20)
    assert "".join(chunk.content for chunk in llm.stream(QUESTION_TEXT)) == reference(QUESTION_TEXT, 20)


def test_prompt_as_token_ids(client, default_model, pipeline):
    text = "The three largest oceans on Earth are"
    ids = [int(t) for t in pipeline.get_tokenizer().encode(text, add_special_tokens=False).input_ids.data[0]]
    as_text = client.completions.create(model=default_model, prompt=text, max_tokens=12, temperature=0)
    as_ids = client.completions.create(model=default_model, prompt=ids, max_tokens=12, temperature=0)
    assert as_ids.usage.prompt_tokens == len(ids) == as_text.usage.prompt_tokens
    assert as_ids.choices[0].text == as_text.choices[0].text and as_ids.choices[0].text
    batch = client.completions.create(model=default_model, prompt=[ids, ids[:3]], max_tokens=12, temperature=0)
    texts = [c.text for c in sorted(batch.choices, key=lambda c: c.index)]
    assert texts[0] == as_text.choices[0].text and batch.usage.prompt_tokens == len(ids) + 3


def chat_reply(client, model, messages, **extra):
    response = client.chat.completions.create(model=model, messages=messages, max_tokens=10, temperature=0, **extra)
    return response.choices[0].message.content, response.usage.prompt_tokens


def test_developer_role_is_the_system_role(client, default_model):
    instruction = "You answer in one word."
    as_system = chat_reply(client, default_model, [{"role": "system", "content": instruction}, *QUESTION])
    as_developer = chat_reply(client, default_model, [{"role": "developer", "content": instruction}, *QUESTION])
    assert as_developer == as_system
    assert chat_reply(client, default_model, QUESTION)[1] != as_system[1]  # the instruction is in the prompt


def test_tool_results_reach_the_prompt(client, default_model):
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}

    def conversation(result: str) -> list[dict]:
        return [{"role": "user", "content": "What is the weather in Oslo?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": result}]

    short, short_tokens = chat_reply(client, default_model, conversation("Rain."))
    _, long_tokens = chat_reply(client, default_model, conversation("Rain, 7 degrees, wind from the north-west."))
    assert short and long_tokens > short_tokens


def test_tool_choice_none_answers_without_the_tools(client, default_model):
    """The default model's template takes no tools (test_tools_refused_when_template_has_none); with tool_choice
    "none" the tools are not offered, so the request is the plain one."""
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    plain = chat_reply(client, default_model, QUESTION)
    assert chat_reply(client, default_model, QUESTION, tools=[tool], tool_choice="none") == plain


def test_completion_logprobs_on_the_engine(client, default_model):
    response = client.completions.create(model=default_model, prompt="The capital of France is", max_tokens=6,
                                         temperature=0, logprobs=0, extra_body={"ignore_eos": True})
    choice = response.choices[0]
    logprobs = choice.logprobs
    assert len(logprobs.token_logprobs) == len(logprobs.tokens) == response.usage.completion_tokens == 6
    assert all(value <= 0 for value in logprobs.token_logprobs) and any(v < 0 for v in logprobs.token_logprobs)
    assert "".join(logprobs.tokens) == choice.text
    assert logprobs.text_offset == [sum(len(t) for t in logprobs.tokens[:i]) for i in range(6)]
