"""A request's prompt, dimensions and truncate_prompt_tokens on the real default model (all-MiniLM-L6-v2), served
from a folder that carries prompts as sentence-transformers saves them, and declared Matryoshka by the operator
(MATRYOSHKA): a prompt is embedded as if written before each text and counted; a Matryoshka vector is the full one's
first values at unit length; a text cut by truncate_prompt_tokens is embedded as its first tokens."""

from __future__ import annotations

import base64

import httpx
import numpy as np
import openai
import pytest

from tests.support.servers import MODELS, RemoteServer
from tests.support.tiny_models import with_prompts

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
PROMPTS = {"query": "query: ", "passage": "passage: "}


@pytest.fixture(scope="module")
def prompted(tmp_path_factory):
    folder = with_prompts(MODELS / MODEL, tmp_path_factory.mktemp("prompted") / "model", PROMPTS)
    with RemoteServer("ovgenai_services.embedding", env={"EMBEDDING_MODEL_PATH": str(folder),
                                                       "MATRYOSHKA": "true"}) as server:
        yield server


def embed(server, **body) -> httpx.Response:
    response = httpx.post(server.url + "/v1/embeddings", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response


def vector_and_tokens(server, **body) -> tuple[np.ndarray, int]:
    answer = embed(server, **body).json()
    return np.array(answer["data"][0]["embedding"]), answer["usage"]["prompt_tokens"]


@pytest.mark.parametrize(("options", "written"), [
    ({"input_type": "query"}, "query: "), ({"input_type": "document"}, "passage: "),
    ({"input_type": "passage"}, "passage: "), ({"prompt_name": "query"}, "query: "),
])
def test_a_prompt_is_embedded_and_counted_as_if_written_before_the_text(prompted, options, written):
    plain, plain_tokens = vector_and_tokens(prompted, input="Where is the cat?")
    chosen, tokens = vector_and_tokens(prompted, input="Where is the cat?", **options)
    by_hand, by_hand_tokens = vector_and_tokens(prompted, input=written + "Where is the cat?")
    assert float(chosen @ by_hand) > 0.9999 and tokens == by_hand_tokens > plain_tokens
    assert float(chosen @ plain) < 0.999  # the prompt changed the vector


def test_official_clients_send_the_prompt_in_the_extra_body_and_tei_takes_prompt_name(prompted):
    client = openai.OpenAI(base_url=prompted.url + "/v1", api_key="unused", max_retries=0)
    sent = client.embeddings.create(model=MODEL, input="hello", encoding_format="float",
                                    extra_body={"input_type": "query"}).data[0].embedding
    tei = httpx.post(prompted.url + "/embed", json={"inputs": "hello", "prompt_name": "query"}).json()[0]
    by_hand = vector_and_tokens(prompted, input="query: hello")[0]
    assert float(np.dot(sent, by_hand)) > 0.9999 and float(np.dot(tei, by_hand)) > 0.9999


def test_an_unknown_prompt_name_is_a_400_listing_the_model_s_prompts(prompted):
    response = httpx.post(prompted.url + "/v1/embeddings", json={"input": "a", "prompt_name": "retrieval"})
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == "prompt_name"
    assert error["message"] == "Unknown prompt_name 'retrieval'; this model's prompts are: 'passage', 'query'."


@pytest.mark.parametrize("size", [64, 128, 383])
def test_a_matryoshka_vector_is_the_full_one_s_first_values_at_unit_length(prompted, size):
    full = vector_and_tokens(prompted, input="The cat sits on the mat.")[0]
    cut = vector_and_tokens(prompted, input="The cat sits on the mat.", dimensions=size)[0]
    assert cut.shape == (size,) and abs(np.linalg.norm(cut) - 1) < 1e-5
    np.testing.assert_allclose(cut, full[:size] / np.linalg.norm(full[:size]), atol=1e-5)
    packed = embed(prompted, input="The cat sits on the mat.", dimensions=size, encoding_format="base64")
    decoded = np.frombuffer(base64.b64decode(packed.json()["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(decoded, cut, rtol=1e-6)
    tei = httpx.post(prompted.url + "/embed", json={"inputs": "The cat sits on the mat.", "dimensions": size})
    np.testing.assert_allclose(tei.json()[0], cut, atol=1e-6)


def test_more_dimensions_than_the_model_gives_are_a_400_naming_it(prompted):
    response = httpx.post(prompted.url + "/v1/embeddings", json={"input": "a", "dimensions": 385})
    assert response.status_code == 400 and response.json()["error"]["param"] == "dimensions"
    assert f"Model '{MODEL}' gives vectors of 384 dimensions" in response.json()["error"]["message"]


def test_truncate_prompt_tokens_embeds_each_text_as_its_first_tokens(prompted):
    long = "word " * 600
    cut = embed(prompted, input=[long, "hello"], truncate_prompt_tokens=10)
    assert cut.json()["usage"]["prompt_tokens"] == 10 + 3 and cut.headers["x-inputs-truncated"] == "1"
    first_tokens = vector_and_tokens(prompted, input="word " * 8)  # [CLS], 8 words, [SEP]: 10 tokens
    assert first_tokens[1] == 10
    assert float(np.dot(cut.json()["data"][0]["embedding"], first_tokens[0])) > 0.9999
    whole = embed(prompted, input=long, truncate_prompt_tokens=-1)  # the model's limit
    assert whole.json()["usage"]["prompt_tokens"] == 256
    refused = httpx.post(prompted.url + "/v1/embeddings", json={"input": "a", "truncate_prompt_tokens": 257})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "truncate_prompt_tokens"
