"""Every kind of Hugging Face Hub model, pulled by the real huggingface_hub client from a Hub on loopback
(tests/support/hub.py) that serves small models made here: OpenVINO IR as it is and GGUF files without the export
tools (torch, optimum, NNCF and transformers blocked), a Transformers checkpoint exported; a transfer cut mid-way
and resumed, gated, missing and wrong revisions; the pulled IR and GGUF models served and asked a question."""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ovgenai_models.defaults import LLM_FILE, LLM_PACKAGE, package_dir
from ovgenai_models.repository import registered
from tests.support.hub import LoopbackHub
from tests.support.servers import ROOT, RemoteServer, free_port
from tests.support.tiny_models import build_tiny_bert_encoder, build_tiny_cross_encoder, build_tiny_llama

# What serving, OpenVINO IR and GGUF models must do without: importing any of these fails in the blocked runs.
EXPORT_TOOLS = ("torch", "optimum", "nncf", "transformers")
WITHOUT_EXPORT_TOOLS = (f"import sys\nfor name in {EXPORT_TOOLS!r}:\n    sys.modules[name] = None\n"
                        "from ovgenai_models.__main__ import main\nsys.exit(main(sys.argv[1:]))")


def models_cli(*args: str, env: dict[str, str], without_export_tools: bool = False) -> subprocess.CompletedProcess:
    command = ["-c", WITHOUT_EXPORT_TOOLS] if without_export_tools else ["-m", "ovgenai_models"]
    # Blocked runs have no environment with the tools to hand a conversion to (`make test` names one).
    handoff = {"OVGENAI_EXPORT_PYTHON": ""} if without_export_tools else {}
    return subprocess.run([sys.executable, *command, *args], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, **env, **handoff})


def prepare(repository, env: dict[str, str], *args: str, without_export_tools: bool = False):
    return models_cli("prepare", "--model_repository_path", str(repository), *args, env=env,
                      without_export_tools=without_export_tools)


def last_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The models the hub serves: a tiny Llama as a Transformers checkpoint and exported to OpenVINO IR, a BERT
    encoder and a cross-encoder, and the default model's GGUF file."""
    root = tmp_path_factory.mktemp("made")
    llama = build_tiny_llama(root / "tiny-llama")
    exported = models_cli("text_generation", "--source_model", str(llama), "--model_name", "tiny-ir",
                          "--model_repository_path", str(root / "exported"), "--weight-format", "int8", env={})
    assert exported.returncode == 0, exported.stderr[-2000:]
    ir = {p.name: p for p in (root / "exported" / "tiny-ir").iterdir() if p.name != "graph.pbtxt"}
    (root / "onnx").mkdir()
    (root / "onnx" / "model.onnx").write_bytes(b"not for export")
    (root / "flax_model.msgpack").write_bytes(b"not for export")
    checkpoint = {p.name: p for p in llama.iterdir()}
    checkpoint |= {"onnx/model.onnx": root / "onnx" / "model.onnx", "flax_model.msgpack": root / "flax_model.msgpack"}
    other_quantization = root / "SmolLM2-135M-Instruct.Q8_0.gguf"
    other_quantization.write_bytes(b"GGUF never downloaded")
    gguf = {LLM_FILE: package_dir(LLM_PACKAGE) / LLM_FILE, other_quantization.name: other_quantization}
    return {"ir": ir, "checkpoint": checkpoint, "gguf": gguf, "bert": build_tiny_bert_encoder(root / "bert"),
            "cross": build_tiny_cross_encoder(root / "cross")}


@pytest.fixture(scope="module")
def hub(made):
    with LoopbackHub() as hub:
        hub.add("test-org/tiny-llama-int8-ov", made["ir"])
        hub.add("test-org/tiny-llama", made["checkpoint"])
        hub.add("test-org/SmolLM2-135M-Instruct-GGUF", made["gguf"])
        hub.add("test-org/gated-llama-ov", made["ir"], gated=True)
        yield hub


@pytest.fixture(scope="module")
def pulled(tmp_path_factory, hub):
    """One repository with the IR repository and one GGUF file of the GGUF repository pulled into it, each without
    the export tools; the GGUF file's first transfer breaks off mid-way."""
    repository = tmp_path_factory.mktemp("pulled")
    env = hub.env(tmp_path_factory.mktemp("hf-home"))
    # huggingface_hub writes what it receives in blocks of 10 MiB, and resumes from the last whole block.
    cut = 45 * 1024 * 1024
    hub.cut_first_transfer("test-org/SmolLM2-135M-Instruct-GGUF", LLM_FILE, cut)
    ir = prepare(repository, {**env, "LLM_MODEL_ID": "test-org/tiny-llama-int8-ov"}, "--embedding", "none",
                 without_export_tools=True)
    assert ir.returncode == 0, ir.stdout[-2000:] + ir.stderr[-3000:]
    gguf = prepare(repository, {**env, "LLM_MODEL_ID": "test-org/SmolLM2-135M-Instruct-GGUF:Q4_1"}, "--embedding",
                   "none", without_export_tools=True)
    assert gguf.returncode == 0, gguf.stdout[-2000:] + gguf.stderr[-3000:]
    return {"repository": repository, "env": env, "cut": cut}


def test_an_openvino_repository_is_downloaded_as_it_is(pulled, made, hub):
    folder = pulled["repository"] / "test-org/tiny-llama-int8-ov"
    for name, source in made["ir"].items():  # real files: the servers mount the repository, not the Hub's cache
        assert not (folder / name).is_symlink() and (folder / name).read_bytes() == source.read_bytes(), name
    assert 'models_path: "./"' in (folder / "graph.pbtxt").read_text()
    assert registered(pulled["repository"] / "config.json", "test-org/tiny-llama-int8-ov")
    assert hub.gets("/api/models/test-org/tiny-llama-int8-ov/revision/main")  # listed through the Hub's API


def test_a_cut_transfer_resumes_with_a_range_request(pulled, made, hub):
    first, second, *more = [r for r in hub.gets(LLM_FILE) if "/test-org/SmolLM2-135M-Instruct-GGUF/" in r.path]
    assert (first.range, first.status, second.status, more) == (None, 200, 206, [])
    resumed_at = int(second.range.removeprefix("bytes=").removesuffix("-"))
    assert 0 < resumed_at <= pulled["cut"]  # from what it had, not from the start
    [cached] = Path(pulled["env"]["HF_HOME"], "hub").glob(f"models--test-org--SmolLM2-*/snapshots/*/{LLM_FILE}")
    assert filecmp.cmp(cached, made["gguf"][LLM_FILE], shallow=False)  # complete and intact


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


def test_the_ovms_pull_line_then_its_serve_line(hub, tmp_path):
    """`ovms --pull --source_model ... --model_repository_path models`, then the same without --pull serves it, from
    the repository and without another download."""
    import openai

    env = hub.env(tmp_path / "hf")
    source = ["--source_model", "test-org/tiny-llama-int8-ov", "--model_repository_path", str(tmp_path / "models"),
              "--task", "text_generation"]
    pulled = subprocess.run([sys.executable, "-m", "ovgenai_server", "--pull", *source], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, env={**os.environ, **env})
    assert pulled.returncode == 0, pulled.stderr[-3000:]
    assert registered(tmp_path / "models" / "config.json", "test-org/tiny-llama-int8-ov")
    downloads = len(hub.gets("/resolve/"))
    with RemoteServer("ovgenai_server", ["--rest_port", str(port := free_port()), *source], env=env,
                      port=port) as server:
        client = openai.OpenAI(base_url=server.url + "/v3", api_key="unused", max_retries=0, timeout=120)
        assert [model.id for model in client.models.list().data] == ["test-org/tiny-llama-int8-ov"]
        reply = client.completions.create(model="test-org/tiny-llama-int8-ov", prompt="fox", max_tokens=3,
                                          extra_body={"ignore_eos": True})
        assert reply.usage.completion_tokens == 3
    assert len(hub.gets("/resolve/")) == downloads


def test_the_vllm_serve_line_with_a_hub_id(hub, tmp_path):
    import openai

    env = {**hub.env(tmp_path / "hf"), "OVGENAI_CACHE_DIR": str(tmp_path / "cache")}
    with RemoteServer("ovgenai_server", ["serve", "test-org/tiny-llama-int8-ov", "--port", str(port := free_port()),
                                         "--max-num-seqs", "4"], env=env, port=port) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        assert [model.id for model in client.models.list().data] == ["test-org/tiny-llama-int8-ov"]
        reply = client.chat.completions.create(model="test-org/tiny-llama-int8-ov", max_tokens=3,
                                               messages=[{"role": "user", "content": "fox"}],
                                               extra_body={"ignore_eos": True})
        assert reply.usage.completion_tokens == 3
    assert (tmp_path / "cache" / "models" / "test-org" / "tiny-llama-int8-ov" / "openvino_model.xml").is_file()


def test_a_source_model_that_cannot_be_fetched_stops_the_server_with_the_reason(hub, tmp_path):
    result = subprocess.run([sys.executable, "-m", "ovgenai_server", "--source_model", "test-org/no-such-model",
                             "--model_repository_path", str(tmp_path / "models")], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, env={**os.environ, **hub.env(tmp_path / "hf")})
    assert result.returncode == 2, result.stderr[-3000:]
    assert "test-org/no-such-model" in result.stderr.strip().splitlines()[-1]


def test_a_second_repository_reuses_the_hubs_cache(pulled, hub, tmp_path):
    before = len(hub.gets("/resolve/"))
    again = prepare(tmp_path / "repo", {**pulled["env"], "LLM_MODEL_ID": "test-org/tiny-llama-int8-ov"},
                    "--embedding", "none", without_export_tools=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(hub.gets("/resolve/")) == before  # HF_HOME held every file: nothing downloaded again


def test_several_gguf_files_and_no_choice_is_an_error_that_lists_them(hub, tmp_path):
    result = prepare(tmp_path / "repo", {**hub.env(tmp_path / "hf"), "LLM_MODEL_ID":
                                         "test-org/SmolLM2-135M-Instruct-GGUF"}, without_export_tools=True)
    error = last_error(result)
    assert f"several GGUF files: {LLM_FILE}, SmolLM2-135M-Instruct.Q8_0.gguf" in error and "GGUF_FILENAME" in error
    named = prepare(tmp_path / "repo", {**hub.env(tmp_path / "hf"), "GGUF_FILENAME": "SmolLM2.Q2_K.gguf",
                                        "LLM_MODEL_ID": "test-org/SmolLM2-135M-Instruct-GGUF"},
                    without_export_tools=True)
    assert "has no file 'SmolLM2.Q2_K.gguf' (GGUF_FILENAME); its GGUF files: " in last_error(named)
    assert not (tmp_path / "repo" / "test-org").exists()


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
    assert "'test-org/tiny-llama' is a Transformers checkpoint" in error and "pip install -e '.[export]'" in error
    assert not (tmp_path / "hf" / "hub" / "models--test-org--tiny-llama" / "blobs").exists()


def test_a_repository_without_its_tokenizer_as_ir_says_what_is_missing(hub, made, tmp_path):
    without = {name: path for name, path in made["ir"].items() if "tokenizer.xml" not in name
               and "tokenizer.bin" not in name}
    hub.add("test-org/no-tokenizer-ov", without)
    env = {**hub.env(tmp_path / "hf"), "LLM_MODEL_ID": "test-org/no-tokenizer-ov"}
    error = last_error(prepare(tmp_path / "repo", env, "--embedding", "none", without_export_tools=True))
    assert "holds OpenVINO IR but not openvino_tokenizer.xml and openvino_detokenizer.xml" in error
    assert "needs transformers" in error and "pip install -e '.[export]'" in error
    # With transformers installed, openvino-tokenizers converts them from the repository's tokenizer files.
    converted = prepare(tmp_path / "repo", env, "--embedding", "none")
    assert converted.returncode == 0, converted.stderr[-3000:]
    folder = tmp_path / "repo" / "test-org/no-tokenizer-ov"
    assert (folder / "openvino_tokenizer.xml").is_file() and (folder / "openvino_detokenizer.xml").is_file()
    cached = next((tmp_path / "hf" / "hub").glob("models--test-org--no-tokenizer-ov/snapshots/*"))
    assert not (cached / "openvino_tokenizer.xml").exists()  # written into the repository, never into the cache


@pytest.mark.parametrize(("token", "status"), [("", 401), ("hf_not_granted", 403)])
def test_a_gated_repository_needs_a_granted_token(hub, tmp_path, token, status):
    env = {**hub.env(tmp_path / "hf"), "LLM_MODEL_ID": "test-org/gated-llama-ov", "HF_TOKEN": token}
    error = last_error(prepare(tmp_path / "repo", env, "--embedding", "none", without_export_tools=True))
    assert "'test-org/gated-llama-ov' is gated or private" in error and "HF_TOKEN" in error, error
    assert any(r.status == status for r in hub.requests if "/test-org/gated-llama-ov/resolve/" in r.path)


def test_opeas_token_name_opens_a_gated_repository(hub, tmp_path):
    env = {**hub.env(tmp_path / "hf"), "LLM_MODEL_ID": "test-org/gated-llama-ov",
           "HUGGINGFACEHUB_API_TOKEN": hub.granted_token}
    result = prepare(tmp_path / "repo", env, "--embedding", "none", without_export_tools=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "repo" / "test-org/gated-llama-ov" / "openvino_model.xml").is_file()
    assert any(r.authorization == f"Bearer {hub.granted_token}" and r.status == 200 for r in hub.requests
               if "/test-org/gated-llama-ov/resolve/" in r.path)


def test_a_missing_repository_and_a_wrong_revision_are_named(hub, tmp_path):
    env = hub.env(tmp_path / "hf")
    missing = last_error(prepare(tmp_path / "repo", {**env, "LLM_MODEL_ID": "test-org/no-such-model"},
                                 without_export_tools=True))
    assert "Could not fetch 'test-org/no-such-model'" in missing and "no model of that id" in missing
    assert "gated" not in missing
    wrong = last_error(prepare(tmp_path / "repo", {**env, "LLM_MODEL_ID": "test-org/tiny-llama-int8-ov",
                                                   "LLM_MODEL_REVISION": "v9"}, without_export_tools=True))
    assert "'test-org/tiny-llama-int8-ov' has no revision 'v9'" in wrong and "LLM_MODEL_REVISION" in wrong
    assert not (tmp_path / "repo" / "test-org").exists()


def test_a_revision_is_pinned_and_a_changed_one_prepared_again(hub, made, tmp_path):
    notice = tmp_path / "NOTICE.txt"
    notice.write_text("revision v1")
    hub.add("test-org/revisions-ov", made["ir"])
    hub.add("test-org/revisions-ov", {**made["ir"], "NOTICE.txt": notice}, revision="v1")
    repository, env = tmp_path / "repo", {**hub.env(tmp_path / "hf"), "LLM_MODEL_ID": "test-org/revisions-ov"}
    folder = repository / "test-org/revisions-ov"
    pinned = prepare(repository, {**env, "LLM_MODEL_REVISION": "v1"}, "--embedding", "none",
                     without_export_tools=True)
    assert pinned.returncode == 0 and (folder / "NOTICE.txt").read_text() == "revision v1", pinned.stderr[-3000:]
    main = prepare(repository, env, "--embedding", "none", without_export_tools=True)
    assert main.returncode == 0 and not (folder / "NOTICE.txt").exists(), main.stderr[-3000:]
    unchanged = prepare(repository, env, "--embedding", "none", without_export_tools=True)
    assert "test-org/revisions-ov: already prepared" in unchanged.stdout


def test_an_embedder_and_a_reranker_from_the_hub_are_served_by_rerank_model_id(hub, made, tmp_path):
    import httpx

    hub.add("test-org/tiny-bert", made["bert"])
    hub.add("test-org/tiny-cross", made["cross"])
    repository = tmp_path / "repo"
    env = {**hub.env(tmp_path / "hf"), "EMBEDDING_MODEL_ID": "test-org/tiny-bert",
           "RERANK_MODEL_ID": "test-org/tiny-cross"}
    result = prepare(repository, env, "--llm", "none")
    assert result.returncode == 0, result.stderr[-3000:]
    info = json.loads((repository / "test-org/tiny-bert" / "embedding_config.json").read_text())
    assert (info["pooling"], info["normalize"]) == ("mean", True)  # read from its own modules.json
    service_env = {"EMBEDDING_MODEL_PATH": str(repository / "test-org/tiny-bert"),
                   "RERANK_MODEL_ID": "test-org/tiny-cross", "MODEL_REPOSITORY_PATH": str(repository)}
    with RemoteServer("microservices.embedding", env=service_env) as server:
        body = {"query": "quick fox", "documents": ["the quick brown fox", "paris"], "top_n": 1}
        ranked = httpx.post(server.url + "/v1/rerank", json=body, timeout=60)
        assert ranked.status_code == 200 and len(ranked.json()["results"]) == 1, ranked.text
