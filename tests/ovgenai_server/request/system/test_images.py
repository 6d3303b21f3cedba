"""Images in chat on the real engine: a tiny LLaVA (random weights, built and exported with optimum-intel in the test)
served with continuous batching, its answers equal to openvino-genai's in-process VLM pipeline on the same image;
text-only models refuse images with a 400."""

from __future__ import annotations

import base64
import io

import httpx
import numpy as np
import pytest

from ovgenai_models.export import TextGenerationOptions, export_text_generation
from tests.support.servers import TEST_KV_CACHE, RemoteServer
from tests.support.tiny_models import build_tiny_llava

NAME = "tiny-llava"


def png(seed: int, size: int = 40) -> bytes:
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def data_url(image: bytes, kind: str = "png") -> str:
    return f"data:image/{kind};base64," + base64.b64encode(image).decode()


def ask(text: str, *urls: str) -> list[dict]:
    parts = [{"type": "text", "text": text}] + [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return [{"role": "user", "content": parts}]


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    """Exported by the export tool, as a user prepares their own model (int8 weights, its default)."""
    root = tmp_path_factory.mktemp("vlm")
    source = build_tiny_llava(root / "source")
    return export_text_generation(str(source), NAME, root / "models", TextGenerationOptions(weight_format="int8"),
                                  progress=lambda _: None)


@pytest.fixture(scope="module")
def server(model_folder):
    with RemoteServer("ovgenai_server", ["--model", str(model_folder.parent)], env=TEST_KV_CACHE) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    return server.openai_client()


def in_process(model_folder, prompt: str, images: list[bytes], max_new_tokens: int) -> str:
    return in_process_result(model_folder, prompt, images, max_new_tokens).texts[0]


def in_process_result(model_folder, prompt: str, images: list[bytes], max_new_tokens: int):
    import openvino
    import openvino_genai
    from PIL import Image

    from ovgenai_common.cpu import default_properties

    # The server's CPU precision (f32 unless the CPU computes bf16 natively), so that both compute alike.
    precision = default_properties("CPU", {}, "auto").get("INFERENCE_PRECISION_HINT")
    pipeline = openvino_genai.VLMPipeline(str(model_folder), "CPU",
                                          **({"INFERENCE_PRECISION_HINT": precision} if precision else {}))
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens, config.apply_chat_template = max_new_tokens, False
    tensors = [openvino.Tensor(np.asarray(Image.open(io.BytesIO(image)).convert("RGB"))[None]) for image in images]
    return pipeline.generate(prompt, images=tensors, generation_config=config)


def test_the_served_answer_is_the_in_process_pipeline_s(client, model_folder):
    image = png(1)
    messages = ask("describe this ", data_url(image))
    reply = client.chat.completions.create(model=NAME, messages=messages, max_tokens=8, temperature=0)
    assert reply.usage.completion_tokens == 8
    prompt = "<|user|>describe this <ov_genai_image_0></s><|assistant|>"  # the model's chat template, rendered
    assert reply.choices[0].message.content == in_process(model_folder, prompt, [image], 8)
    other = client.chat.completions.create(model=NAME, messages=ask("describe this ", data_url(png(2))),
                                           max_tokens=8, temperature=0)
    assert other.choices[0].message.content != reply.choices[0].message.content  # the image is read


def test_usage_counts_the_image_tokens_the_engine_computed(client, model_folder):
    """An image is tokens too (25 for this vision tower): usage.prompt_tokens is what openvino-genai's own VLM
    pipeline counts for the same prompt and image, streamed or not, and more than the text alone."""
    image = png(5)
    messages = ask("describe this ", data_url(image))
    prompt = "<|user|>describe this <ov_genai_image_0></s><|assistant|>"
    expected = in_process_result(model_folder, prompt, [image], 2).perf_metrics.get_num_input_tokens()
    reply = client.chat.completions.create(model=NAME, messages=messages, max_tokens=2, temperature=0)
    assert reply.usage.prompt_tokens == expected
    streamed = [chunk for chunk in client.chat.completions.create(
        model=NAME, messages=messages, max_tokens=2, temperature=0, stream=True,
        stream_options={"include_usage": True}) if chunk.usage]
    assert [chunk.usage.prompt_tokens for chunk in streamed] == [expected]
    text_only = client.chat.completions.create(model=NAME, messages=ask("describe this "), max_tokens=2,
                                               temperature=0)
    assert reply.usage.prompt_tokens >= text_only.usage.prompt_tokens + 25
    # With a stop string too: the engine, which counts the image's tokens only as it ends a request, ends it.
    longer = client.chat.completions.create(model=NAME, messages=messages, max_tokens=8, temperature=0)
    text = longer.choices[0].message.content
    assert len(text) >= 4, text
    stopped = client.chat.completions.create(model=NAME, messages=messages, max_tokens=8, temperature=0,
                                             stop=[text[2:4]])
    assert stopped.choices[0].model_extra["stop_reason"] == text[2:4] and stopped.usage.prompt_tokens == expected


def test_images_and_text_alone_in_one_batch_and_streamed(client):
    import concurrent.futures

    requests = [ask("describe this ", data_url(png(seed))) for seed in (3, 4)] + [ask("just text")]
    alone = [client.chat.completions.create(model=NAME, messages=m, max_tokens=6, temperature=0)
             .choices[0].message.content for m in requests]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        together = list(pool.map(lambda m: "".join(
            chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
                model=NAME, messages=m, max_tokens=6, temperature=0, stream=True) if chunk.choices), requests))
    assert together == alone


def test_the_model_list_says_it_reads_images(server):
    [card] = httpx.get(f"{server.url}/v1/models").json()["data"]
    assert card["id"] == NAME and card["input_modalities"] == ["text", "image"]


@pytest.mark.parametrize(("url", "reason"), [
    ("https://example.com/cat.png", "fetches no URLs"),
    ("data:image/png;base64,@@@", "not valid base64"),
    (data_url(b"not an image"), "cannot be read"),
    ("file:///etc/passwd", "data URL"),
])
def test_an_image_that_cannot_be_read_is_a_400_naming_its_part(server, url, reason):
    reply = httpx.post(f"{server.url}/v1/chat/completions", json={"model": NAME, "messages": ask("x", url)})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == "messages.0.content.1.image_url" and reason in error["message"]


def test_an_image_declaring_too_many_pixels_is_refused_before_it_is_decoded(server):
    from PIL import Image

    out = io.BytesIO()
    Image.new("1", (5000, 5000)).save(out, format="PNG")  # a small file of 25 megapixels
    reply = httpx.post(f"{server.url}/v1/chat/completions",
                       json={"model": NAME, "messages": ask("x", data_url(out.getvalue()))})
    assert reply.status_code == 400 and "5000x5000" in reply.json()["error"]["message"]


def test_a_requests_images_together_are_refused_past_the_pixel_budget_before_decoding(server):
    """Each within its own limit, eight declared images of 4096x4096 came to 400 MB of pixels (from about 0.6 MB of
    PNG) decoded before admission; now their headers are summed first."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("1", (4096, 4096)).save(out, format="PNG")
    reply = httpx.post(f"{server.url}/v1/chat/completions", timeout=120,
                       json={"model": NAME, "messages": ask("x", *[data_url(out.getvalue())] * 8)})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == "messages.0.content.2.image_url" and "per request" in error["message"]


def test_a_text_only_model_refuses_images(backend, default_model):
    reply = httpx.post(f"{backend.url}/v1/chat/completions",
                       json={"model": default_model, "messages": ask("x", data_url(png(1)))})
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == "messages.0.content.1.image_url"
    [card] = httpx.get(f"{backend.url}/v1/models").json()["data"]
    assert card["input_modalities"] == ["text"]
