"""What each kind of Hub repository becomes in the repository (pull.py), pulled by the real huggingface_hub client
from the loopback Hub: OpenVINO IR as it is and one GGUF file of a GGUF repository converted, both without the
export tools (torch, optimum, NNCF and transformers blocked), and both served and asked a question; a Transformers
checkpoint exported with optimum-intel's weight compression, or refused before its download without the tools; an
IR repository without its tokenizer as IR. The Hub's own behaviour (resumed transfers, gated repositories, missing
revisions): test_hub.py."""

from __future__ import annotations

import json

from ovgenai_models.defaults import LLM_FILE
from ovgenai_models.repository import registered
from tests.ovgenai_models.system.hub_models import last_error, models_cli, prepare
from tests.support.servers import RemoteServer


def test_an_openvino_repository_is_downloaded_as_it_is(pulled, made, hub):
    folder = pulled["repository"] / "test-org/tiny-llama-int8-ov"
    for name, source in made["ir"].items():  # real files: the servers mount the repository, not the Hub's cache
        assert not (folder / name).is_symlink() and (folder / name).read_bytes() == source.read_bytes(), name
    assert 'models_path: "./"' in (folder / "graph.pbtxt").read_text()
    assert registered(pulled["repository"] / "config.json", "test-org/tiny-llama-int8-ov")
    assert hub.gets("/api/models/test-org/tiny-llama-int8-ov/revision/main")  # listed through the Hub's API


def test_one_quantization_of_a_gguf_repository_is_downloaded_alone_and_converted(pulled, hub):
    name = "test-org/SmolLM2-135M-Instruct-GGUF:Q4_1"  # served under the id as given, quantization included
    folder = pulled["repository"] / name
    assert (folder / "openvino_model.xml").is_file() and not list(folder.glob("*.gguf"))
    assert registered(pulled["repository"] / "config.json", name)
    assert hub.gets(LLM_FILE) and not hub.gets("Q8_0")  # only the file asked for was downloaded


def test_the_pulled_ir_and_gguf_models_answer(pulled):
    import openai

    with RemoteServer("ovgenai_server", ["--model", str(pulled["repository"])], startup_timeout=300) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        served = {model.id for model in client.models.list().data}
        assert served == {"test-org/tiny-llama-int8-ov", "test-org/SmolLM2-135M-Instruct-GGUF:Q4_1"}
        tiny = client.chat.completions.create(model="test-org/tiny-llama-int8-ov", max_tokens=4,
                                              messages=[{"role": "user", "content": "fox"}],
                                              extra_body={"ignore_eos": True})
        assert tiny.usage.completion_tokens == 4
        smol = client.chat.completions.create(model="test-org/SmolLM2-135M-Instruct-GGUF:Q4_1", max_tokens=12,
                                              temperature=0, messages=[{"role": "user", "content": "Say hello."}])
        assert smol.choices[0].message.content.strip()


def test_a_transformers_checkpoint_is_exported_with_optimum_intels_weight_quantization(hub, tmp_path):
    import openvino

    repository = tmp_path / "repo"
    result = prepare(repository, {**hub.env(tmp_path / "hf"), "LLM_MODEL_ID": "test-org/tiny-llama"},
                     "--embedding", "none")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    folder = repository / "test-org/tiny-llama"
    assert (folder / "openvino_model.xml").is_file() and (folder / "openvino_tokenizer.xml").is_file()
    quantization = json.loads((folder / "openvino_config.json").read_text())["quantization_config"]
    assert quantization == {"bits": 8, "sym": False}  # optimum-intel has no int4 default for this model: int8
    model = openvino.Core().read_model(folder / "openvino_model.xml")
    assert any(op.get_type_name() == "Constant" and op.get_element_type() == openvino.Type.u8
               for op in model.get_ops())  # the weights are compressed
    assert not (folder / ".uncompressed").exists()
    # Its weights and tokenizer only: the checkpoint's other formats are never downloaded.
    assert not hub.gets("model.onnx") and not hub.gets("flax_model.msgpack")


def test_a_checkpoint_without_the_export_tools_is_refused_before_its_download(hub, tmp_path):
    result = prepare(tmp_path / "repo", {**hub.env(tmp_path / "hf"), "LLM_MODEL_ID": "test-org/tiny-llama"},
                     "--embedding", "none", without_export_tools=True)
    error = last_error(result)
    assert "'test-org/tiny-llama' is a Transformers checkpoint" in error and "make export-tools" in error
    assert not (tmp_path / "hf" / "hub" / "models--test-org--tiny-llama" / "blobs").exists()


def test_a_repository_without_its_tokenizer_as_ir_says_what_is_missing(hub, made, tmp_path):
    without = {name: path for name, path in made["ir"].items() if "tokenizer.xml" not in name
               and "tokenizer.bin" not in name}
    hub.add("test-org/no-tokenizer-ov", without)
    env = {**hub.env(tmp_path / "hf"), "LLM_MODEL_ID": "test-org/no-tokenizer-ov"}
    error = last_error(prepare(tmp_path / "repo", env, "--embedding", "none", without_export_tools=True))
    assert "holds OpenVINO IR but not openvino_tokenizer.xml and openvino_detokenizer.xml" in error
    assert "needs transformers" in error and "pip install 'transformers" in error
    # With transformers installed, openvino-tokenizers converts them from the repository's tokenizer files.
    converted = prepare(tmp_path / "repo", env, "--embedding", "none")
    assert converted.returncode == 0, converted.stderr[-3000:]
    folder = tmp_path / "repo" / "test-org/no-tokenizer-ov"
    assert (folder / "openvino_tokenizer.xml").is_file() and (folder / "openvino_detokenizer.xml").is_file()
    cached = next((tmp_path / "hf" / "hub").glob("models--test-org--no-tokenizer-ov/snapshots/*"))
    assert not (cached / "openvino_tokenizer.xml").exists()  # written into the repository, never into the cache


def test_a_sentence_transformers_repository_s_own_ir_is_pulled_without_torch(hub, made, tmp_path):
    """Its openvino/openvino_model.xml, tokenizer and pooling: never its safetensors weights nor the conversion tools
    (torch, optimum and NNCF blocked); the tokenizer converted with transformers' tokenizer classes, as `make run`
    installs them. The embedding service's embedder embeds with it as the checkpoint does."""
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    from ovgenai_services.embedding.model import ModelConfig, load_embedder, read_model_info

    repository = tmp_path / "repo"
    env = {**hub.env(tmp_path / "hf"), "EMBEDDING_MODEL_ID": "test-org/tiny-st"}
    result = models_cli("prepare", "--model_repository_path", str(repository), "--llm", "none", env=env,
                        blocked=("torch", "optimum", "nncf"))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "downloading the OpenVINO IR test-org/tiny-st publishes (openvino/openvino_model.xml)" in result.stdout
    assert not hub.gets("/test-org/tiny-st/resolve/main/model.safetensors")
    folder = repository / "test-org/tiny-st"
    assert (folder / "openvino_model.xml").is_file() and (folder / "openvino_tokenizer.xml").is_file()
    info = json.loads((folder / "embedding_config.json").read_text())
    assert (info["pooling"], info["normalize"], info["weight_format"]) == ("mean", True, "published")

    texts = ["red fox", "a quick brown fox jumps"]
    config = ModelConfig(folder, "CPU", read_model_info(folder, None), 64, {})
    ours = load_embedder(config, {"INFERENCE_PRECISION_HINT": "f32"}).embed(texts)
    tokenizer, model = AutoTokenizer.from_pretrained(made["bert"]), AutoModel.from_pretrained(made["bert"]).eval()
    with torch.no_grad():
        batch = tokenizer(texts, padding=True, return_tensors="pt")
        hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1)
        mean = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
    reference = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    assert ((ours * reference).sum(axis=1)).min() >= 0.9999
