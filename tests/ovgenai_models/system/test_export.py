"""The export tool on tiny locally built models: every weight format, outputs checked against transformers,
repository merging, idempotence and each failure mode."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import traceback

import numpy as np
import pytest

from ovgenai_models.calibration import builtin_texts
from ovgenai_models.export import ExportError, TextGenerationOptions, export_text_generation
from tests.support.loopback_http import LoopbackHTTP, QuietHandler
from tests.support.servers import ROOT, RemoteServer
from tests.support.tiny_models import build_tiny_bert_encoder, build_tiny_cross_encoder, build_tiny_llama

F32 = {"INFERENCE_PRECISION_HINT": "f32"}  # compare with PyTorch's fp32, not the CPU's bf16 default


def export_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m ovgenai_models ...`: its argument parsing, messages and exit code. It runs in the test's own
    interpreter (the export libraries load once, not once per export) unless it needs another environment (the hub
    client reads its environment when imported)."""
    if env is not None:
        return subprocess.run([sys.executable, "-m", "ovgenai_models", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=600, env={**os.environ, **env})
    from ovgenai_models.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
        except Exception:
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(["python", "-m", "ovgenai_models", *args], code, out.getvalue(),
                                       err.getvalue())


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# The hub, as a machine without network sees it: a loopback address where nothing listens (no request leaves).
UNREACHABLE_HUB = {"HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}", "HF_HUB_OFFLINE": "0",
                   "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "2"}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    return {"llama": build_tiny_llama(root / "llama"), "bert": build_tiny_bert_encoder(root / "bert"),
            "cross": build_tiny_cross_encoder(root / "cross")}


@pytest.fixture(scope="module")
def repository(tmp_path_factory, sources):
    repo = tmp_path_factory.mktemp("repo")
    for fmt in ("fp32", "fp16", "int8", "int4"):
        result = export_cli("text_generation", "--source_model", str(sources["llama"]), "--model_name",
                            f"tiny-{fmt}", "--weight-format", fmt, "--model_repository_path", str(repo),
                            "--group_size", "16", "--cache_size", "1")
        assert result.returncode == 0, result.stderr[-2000:]
        assert f"serve it with: python -m ovgenai_server --model {repo}" in result.stdout
    others = (("embeddings", "bert", "tiny-bert", "fp32"), ("rerank", "cross", "tiny-cross", "fp32"),
              ("embeddings", "bert", "tiny-bert-fp16", None), ("embeddings", "bert", "tiny-bert-int8", "int8"))
    for task, source, name, fmt in others:
        arguments = [task, "--source_model", str(sources[source]), "--model_name", name,
                     "--model_repository_path", str(repo), *(["--weight-format", fmt] if fmt else [])]
        if name == "tiny-bert":  # scripts/export_model.sh, as users run it (OVMS's export_model.py interface)
            result = subprocess.run(["bash", str(ROOT / "scripts/export_model.sh"), *arguments], cwd=repo.parent,
                                    capture_output=True, text=True, timeout=600)
            assert f"EMBEDDING_MODEL_PATH={repo / name}" in result.stdout, result.stdout + result.stderr[-2000:]
        else:
            result = export_cli(*arguments)
        assert result.returncode == 0, result.stderr[-2000:]
    calibration = repo.parent / "calibration.txt"
    calibration.write_text("\n".join(f"sentence number {i} about the quick brown fox" for i in range(40)))
    result = export_cli("embeddings", "--source_model", str(sources["bert"]), "--model_name", "tiny-bert-full-int8",
                        "--model_repository_path", str(repo), "--quant_mode", "int8",
                        "--calibration_file", str(calibration))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "quantizing weights and activations to int8 with NNCF (40 texts)" in result.stdout
    return repo


def greedy_reference(source, prompt: str, tokens: int) -> tuple[list[int], list[int]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source).eval()
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
    return ids[0].tolist(), out[0, ids.shape[1]:].tolist()


def ov_greedy(folder, prompt_ids: list[int], tokens: int, properties: dict) -> list[int]:
    import openvino
    import openvino_genai

    config = openvino_genai.SchedulerConfig()
    config.cache_size = 1
    pipeline = openvino_genai.ContinuousBatchingPipeline(str(folder), config, "CPU", properties)
    generation = openvino_genai.GenerationConfig(max_new_tokens=tokens, ignore_eos=True)
    handle = pipeline.add_request(0, openvino.Tensor(np.asarray([prompt_ids], dtype=np.int64)), generation)
    out: list[int] = []
    while pipeline.has_non_finished_requests():
        pipeline.step()
        if handle.can_read():
            for output in handle.read().values():
                out.extend(output.generated_ids)
    return out


def test_text_generation_layout(repository):
    folder = repository / "tiny-int4"
    for name in ("openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml", "openvino_detokenizer.xml",
                 "tokenizer_config.json", "chat_template.jinja", "generation_config.json", "graph.pbtxt"):
        assert (folder / name).is_file(), name
    graph = (folder / "graph.pbtxt").read_text()
    assert "cache_size: 1" in graph and "LLMCalculatorOptions" in graph


@pytest.mark.parametrize("fmt", ["fp32", "fp16"])
def test_greedy_tokens_equal_transformers(repository, sources, fmt):
    prompt_ids, expected = greedy_reference(sources["llama"], "the quick brown fox", 16)
    assert ov_greedy(repository / f"tiny-{fmt}", prompt_ids, 16, F32) == expected


@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_compressed_formats_load_and_shrink(repository, sources, fmt):
    prompt_ids, _ = greedy_reference(sources["llama"], "the quick brown fox", 8)
    assert len(ov_greedy(repository / f"tiny-{fmt}", prompt_ids, 8, {})) == 8
    sizes = {f: (repository / f"tiny-{f}" / "openvino_model.bin").stat().st_size for f in ("fp32", "fp16", fmt)}
    assert sizes["fp16"] < sizes["fp32"] * 0.6
    assert sizes[fmt] < sizes["fp32"] * 0.4


def int4_element_types(folder) -> set[str]:
    import openvino

    model = openvino.Core().read_model(folder / "openvino_model.xml")
    four_bit = {openvino.Type.u4: "u4", openvino.Type.i4: "i4"}
    return {four_bit[op.get_element_type()] for op in model.get_ops()
            if op.get_type_name() == "Constant" and op.get_element_type() in four_bit}


def test_an_int4_group_size_that_does_not_fit_the_model_says_what_would(sources, tmp_path):
    """The tiny Llama's layers take 64 or 128 inputs: int4's default groups of 128 cannot split the first. NNCF's own
    error (a traceback naming graph nodes) becomes the group size that fits, and nothing is left behind."""
    result = export_cli("text_generation", "--source_model", str(sources["llama"]), "--model_name", "misfit",
                        "--model_repository_path", str(tmp_path), "--weight-format", "int4")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "int4 in groups of 128 does not fit this model" in result.stderr
    assert "64 input channels" in result.stderr and "--group_size 64" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "misfit").exists() and not (tmp_path / "config.json").exists()


def test_int4_is_asymmetric_unless_sym_is_asked(repository, sources, tmp_path):
    """--sym (optimum-cli's flag): int4 weights without zero points, i4 instead of u4; it decodes faster on CPU."""
    assert int4_element_types(repository / "tiny-int4") == {"u4"}
    result = export_cli("text_generation", "--source_model", str(sources["llama"]), "--model_name", "tiny-int4-sym",
                        "--model_repository_path", str(tmp_path), "--weight-format", "int4", "--sym",
                        "--group_size", "16")
    assert result.returncode == 0, result.stderr[-2000:]
    folder = tmp_path / "tiny-int4-sym"
    assert int4_element_types(folder) == {"i4"}
    quantization = json.loads((folder / "openvino_config.json").read_text())["quantization_config"]
    assert quantization["sym"] is True and quantization["bits"] == 4 and quantization["group_size"] == 16
    prompt_ids, _ = greedy_reference(sources["llama"], "the quick brown fox", 8)
    assert len(ov_greedy(folder, prompt_ids, 8, {})) == 8


@pytest.mark.parametrize(
    ("name", "tolerance"),
    [("tiny-bert", 1e-3), ("tiny-bert-fp16", 1e-2), ("tiny-bert-int8", 0.05), ("tiny-bert-full-int8", 0.05)],
)
def test_embeddings_match_transformers_and_record_pooling(repository, sources, name, tolerance):
    import openvino_genai
    import torch
    from transformers import AutoModel, AutoTokenizer

    info = json.loads((repository / name / "embedding_config.json").read_text())
    assert info["pooling"] == "mean" and info["normalize"] is True and info["dimensions"] == 32
    texts = ["the quick brown fox", "paris is the capital of france"]
    config = openvino_genai.TextEmbeddingPipeline.Config()
    config.pooling_type = openvino_genai.TextEmbeddingPipeline.PoolingType.MEAN
    config.normalize = True
    served = np.array(openvino_genai.TextEmbeddingPipeline(str(repository / name), "CPU", config, **F32)
                      .embed_documents(texts))
    tokenizer = AutoTokenizer.from_pretrained(sources["bert"])
    model = AutoModel.from_pretrained(sources["bert"]).eval()
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1).numpy()
    assert np.allclose((served * expected).sum(1), 1.0, atol=tolerance)


def test_embeddings_default_to_fp16_weights_and_full_int8_to_int8(repository):
    """Left out, --weight-format is fp16 for an embedding model (int8 weights cost it accuracy), and int8 where
    --quant_mode int8 asks for int8 activations (the full-int8 model is exported without the flag too)."""
    def weight_format(name: str) -> str:
        return json.loads((repository / name / "embedding_config.json").read_text())["weight_format"]

    assert weight_format("tiny-bert-fp16") == "fp16" and weight_format("tiny-bert-full-int8") == "int8"


def test_full_int8_quantizes_activations_and_says_so(repository):
    import openvino

    model = openvino.Core().read_model(repository / "tiny-bert-full-int8" / "openvino_model.xml")
    assert any(op.get_type_name() == "FakeQuantize" for op in model.get_ops())
    info = json.loads((repository / "tiny-bert-full-int8" / "embedding_config.json").read_text())
    assert info["quant_mode"] == "int8" and info["weight_format"] == "int8"
    plain = json.loads((repository / "tiny-bert-int8" / "embedding_config.json").read_text())
    assert plain["quant_mode"] is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--calibration_file", "texts.txt"], "--calibration_file goes with --quant_mode int8"),
        (["--quant_mode", "int8", "--weight-format", "fp16"], "cannot give fp16 weights"),
        (["--quant_mode", "int8", "--calibration_file", "empty.txt"], "has no texts"),
        (["--quant_mode", "int8", "--calibration_file", "missing.txt"], "Cannot read calibration texts"),
    ],
)
def test_full_int8_option_errors(tmp_path, sources, extra, message):
    (tmp_path / "empty.txt").write_text("\n  \n")
    (tmp_path / "texts.txt").write_text("a text\n")
    extra = [str(tmp_path / arg) if arg.endswith(".txt") else arg for arg in extra]
    result = export_cli("embeddings", "--source_model", str(sources["bert"]), "--model_name", "never",
                        "--model_repository_path", str(tmp_path / "repo"), *extra)
    assert result.returncode == 2 and message in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "repo" / "never").exists()


def test_rerank_orders_like_transformers(repository, sources):
    import openvino_genai
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    query, documents = "quick fox", ["the quick brown fox", "paris is the capital", "a small model"]
    ranked = openvino_genai.TextRerankPipeline(str(repository / "tiny-cross"), "CPU", **F32).rerank(query, documents)
    tokenizer = AutoTokenizer.from_pretrained(sources["cross"])
    model = AutoModelForSequenceClassification.from_pretrained(sources["cross"]).eval()
    with torch.no_grad():
        logits = model(**tokenizer([query] * 3, documents, padding=True, return_tensors="pt")).logits[:, 0]
    assert [i for i, _ in ranked] == torch.argsort(logits, descending=True).tolist()


def test_config_json_merges_entries(repository):
    config = json.loads((repository / "config.json").read_text())
    assert [e["name"] for e in config["mediapipe_config_list"]] == ["tiny-fp32", "tiny-fp16", "tiny-int8",
                                                                    "tiny-int4"]
    assert [e["config"]["name"] for e in config["model_config_list"]] == ["tiny-bert", "tiny-cross", "tiny-bert-fp16",
                                                                        "tiny-bert-int8", "tiny-bert-full-int8"]


def test_existing_target_needs_overwrite(repository, sources):
    before = (repository / "config.json").read_text()
    result = export_cli("text_generation", "--source_model", str(sources["llama"]), "--model_name", "tiny-int4",
                        "--model_repository_path", str(repository))
    assert result.returncode == 2 and "--overwrite_models" in result.stderr
    assert (repository / "config.json").read_text() == before


def test_failures_leave_nothing_behind(tmp_path):
    unknown = tmp_path / "weird"
    unknown.mkdir()
    (unknown / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    with pytest.raises(ExportError, match="architecture|fetch"):
        export_text_generation(str(unknown), "weird", tmp_path / "repo", TextGenerationOptions(weight_format="fp16"))
    assert not (tmp_path / "repo" / "weird").exists() and not (tmp_path / "repo" / "config.json").exists()


@pytest.fixture(params=[(404, "RepoNotFound"), (403, "GatedRepo")], ids=["unknown-id", "gated"])
def local_hub(request):
    """A Hugging Face Hub on loopback that answers every request as the real hub answers for an id it does not know
    (404, X-Error-Code: RepoNotFound), or for a gated model without access (403, GatedRepo). It records the paths
    asked for."""
    status, code = request.param
    asked: list[str] = []

    class Hub(QuietHandler):
        def answer(self) -> None:
            asked.append(self.path)
            body = json.dumps({"error": code}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Error-Code", code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = do_POST = answer

    with LoopbackHTTP(Hub) as server:
        yield code, {"HF_ENDPOINT": server.url, "HF_HUB_OFFLINE": "0", "HF_HUB_ETAG_TIMEOUT": "5",
                     "HF_HUB_DOWNLOAD_TIMEOUT": "5", "HF_TOKEN": ""}, asked


def test_the_hubs_refusal_is_named(tmp_path, local_hub):
    code, env, asked = local_hub
    result = export_cli("text_generation", "--source_model", "some-org/some-model",
                        "--model_repository_path", str(tmp_path / "repo"), env=env)
    assert result.returncode == 2, result.stderr[-2000:]
    error = result.stderr.strip().splitlines()[-1]
    if code == "RepoNotFound":  # a wrong id is not reported as a licence to accept
        assert "Could not fetch 'some-org/some-model'" in error and "no model of that id" in error, error
        assert "gated" not in error, error
    else:
        assert "'some-org/some-model' is gated or private" in error and "HF_TOKEN" in error, error
    assert any("some-org/some-model" in path for path in asked), asked  # it asked this hub, and no other
    assert not (tmp_path / "repo").exists()


def test_prepare_exports_a_named_model_once(tmp_path, sources):
    """What the models container runs at every start: a folder (here; a hub id for users) is exported once."""
    repo = tmp_path / "repo"
    env = {"LLM_MODEL_ID": str(sources["llama"]), "EMBEDDING_MODEL_ID": str(sources["bert"])}
    first = export_cli("prepare", "--model_repository_path", str(repo), env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert (repo / "llama" / "openvino_model.xml").is_file() and (repo / "bert" / "embedding_config.json").is_file()
    assert json.loads((repo / "config.json").read_text())["mediapipe_config_list"][0]["name"] == "llama"
    second = export_cli("prepare", "--model_repository_path", str(repo), env=env)
    assert second.returncode == 0 and second.stdout.count("nothing to do") == 2, second.stdout


def test_prepare_names_the_model_and_the_network_failure_when_the_hub_is_unreachable(tmp_path):
    result = export_cli("prepare", "--model_repository_path", str(tmp_path / "repo"), "--llm", "some-org/some-llm",
                        "--embedding", "none", env=UNREACHABLE_HUB)
    assert result.returncode == 2
    error = result.stderr.strip().splitlines()[-1]
    assert "Could not fetch 'some-org/some-llm'" in error and "refused" in error.lower(), error


def test_int4_export_is_served_by_the_backend(repository):
    with RemoteServer("ovgenai_server", ["--model", str(repository / "config.json")]) as server:
        import openai

        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        assert "tiny-int4" in [m.id for m in client.models.list().data]
        reply = client.chat.completions.create(model="tiny-int4", messages=[{"role": "user", "content": "fox"}],
                                               max_tokens=5, temperature=0, extra_body={"ignore_eos": True})
        assert reply.usage.completion_tokens == 5


def test_quantized_weights_at_load(repository, tmp_path):
    env = {"VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS": "true", "OVGENAI_CACHE_DIR": str(tmp_path)}
    with RemoteServer("ovgenai_server", ["--model", str(repository / "tiny-fp32")], env=env) as server:
        import httpx

        reply = httpx.post(server.url + "/v1/completions", json={"prompt": "fox", "max_tokens": 3}, timeout=60)
        assert reply.status_code == 200
    [cached] = (tmp_path / "int8").iterdir()
    assert (cached / "openvino_model.bin").stat().st_size < (repository / "tiny-fp32/openvino_model.bin").stat().st_size


def test_a_conversion_is_handed_to_the_environment_that_has_the_tools(tmp_path, sources):
    """`make run` installs no conversion tools beside the servers: where they are missing, the command runs again
    in OVGENAI_EXPORT_PYTHON's environment (here: this interpreter; the servers' one is imitated by hiding them)."""
    hidden = "import sys, runpy; sys.modules['optimum.exporters.openvino'] = None; sys.argv[0] = 'ovgenai_models'; " \
             "runpy.run_module('ovgenai_models', run_name='__main__', alter_sys=True)"
    args = ["embeddings", "--source_model", str(sources["bert"]), "--model_name", "handed-over",
            "--model_repository_path", str(tmp_path), "--weight-format", "fp32"]
    alone = subprocess.run([sys.executable, "-c", hidden, *args], cwd=ROOT, capture_output=True, text=True,
                           timeout=600, env={k: v for k, v in os.environ.items() if k != "OVGENAI_EXPORT_PYTHON"})
    assert alone.returncode == 2 and "not installed" in alone.stderr, alone.stderr[-2000:]
    handed = subprocess.run([sys.executable, "-c", hidden, *args], cwd=ROOT, capture_output=True, text=True,
                            timeout=600, env={**os.environ, "OVGENAI_EXPORT_PYTHON": sys.executable})
    assert handed.returncode == 0, handed.stderr[-2000:]
    assert "converting there" in handed.stdout and (tmp_path / "handed-over" / "openvino_model.xml").is_file()


def test_defaults_is_idempotent(tmp_path):
    first = export_cli("defaults", "--model_repository_path", str(tmp_path), "--skip_embeddings")
    second = export_cli("defaults", "--model_repository_path", str(tmp_path), "--skip_embeddings")
    assert first.returncode == second.returncode == 0
    assert "prepared" in first.stdout and "nothing to do" in second.stdout


def test_defaults_lift_the_tokenizer_cut_of_an_earlier_preparation(tmp_path):
    """A repository prepared before the cut was lifted (its tokenizer as openvino-genai's GGUF reader writes it)
    gets the whole tokenizer at the next `defaults`, without converting the model again."""
    import openvino_genai

    from ovgenai_models.defaults import LLM_FILE, LLM_NAME, LLM_PACKAGE, package_dir

    assert export_cli("defaults", "--model_repository_path", str(tmp_path), "--skip_embeddings").returncode == 0
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copyfile(package_dir(LLM_PACKAGE) / LLM_FILE, raw / "model.gguf")
    openvino_genai.LLMPipeline(str(raw / "model.gguf"), "CPU", enable_save_ov_model=True)
    prepared = tmp_path / LLM_NAME
    for name in ("openvino_tokenizer.xml", "openvino_tokenizer.bin"):
        shutil.copyfile(raw / name, prepared / name)
    text = "hello world " * 10_000

    def counted() -> int:
        return len(openvino_genai.Tokenizer(str(prepared)).encode(text).input_ids.data[0])

    assert counted() == 8192
    again = export_cli("defaults", "--model_repository_path", str(tmp_path), "--skip_embeddings")
    assert again.returncode == 0 and "lifted" in again.stdout
    assert counted() > 20_000  # every word, and the BOS token


def test_embedding_service_serves_exported_embedder_and_reranker(repository):
    import httpx

    env = {"EMBEDDING_MODEL_PATH": str(repository / "tiny-bert"), "RERANK_MODEL_PATH": str(repository / "tiny-cross")}
    with RemoteServer("ovgenai_services.embedding", env=env) as server:
        vectors = httpx.post(server.url + "/v1/embeddings", json={"input": ["fox", "paris"]}).json()
        assert vectors["model"] == "tiny-bert" and len(vectors["data"][0]["embedding"]) == 32
        body = {"query": "quick fox", "documents": ["the quick brown fox", "paris", "a small model"], "top_n": 2,
                "return_documents": True}
        ranked = httpx.post(server.url + "/v1/rerank", json=body).json()["results"]
        assert len(ranked) == 2 and ranked[0]["relevance_score"] >= ranked[1]["relevance_score"]
        assert ranked[0]["document"]["text"] in body["documents"]
        tei = httpx.post(server.url + "/rerank", json={"query": "fox", "texts": ["a", "b"]}).json()
        assert sorted(item["index"] for item in tei) == [0, 1]


def test_a_gguf_source_is_exported_as_ir(tmp_path):
    """GGUF is converted at export (it cannot be served from a read-only mount); the IR keeps its chat template."""
    import openvino_genai

    from ovgenai_models.defaults import LLM_FILE, LLM_PACKAGE, package_dir

    gguf = package_dir(LLM_PACKAGE) / LLM_FILE
    result = export_cli("text_generation", "--source_model", str(gguf), "--model_name", "smol",
                        "--model_repository_path", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    folder = tmp_path / "smol"
    assert (folder / "openvino_model.xml").is_file() and not list(folder.glob("*.gguf"))
    assert 'models_path: "./"' in (folder / "graph.pbtxt").read_text()
    tokenizer = openvino_genai.Tokenizer(str(folder))
    assert "<|im_start|>" in tokenizer.chat_template
    # openvino-genai's GGUF reader cuts every text to its last 8,192 tokens; the prepared tokenizer keeps them all.
    ids = tokenizer.encode("START " + "hello world " * 10_000 + "END").input_ids.data[0].tolist()
    assert len(ids) > 20_000 and tokenizer.decode(ids[:3]).startswith("START")


def test_overwrite_with_full_int8_from_the_built_in_corpus(repository, sources, tmp_path):
    """--overwrite_models replaces a model (still one entry in config.json; without the flag it is refused:
    test_existing_target_needs_overwrite); --quant_mode int8 without a file calibrates on the built-in corpus."""
    import openvino

    repo = tmp_path / "repo"
    shutil.copytree(repository, repo)
    names_before = [e["config"]["name"] for e in json.loads((repo / "config.json").read_text())["model_config_list"]]
    plain_size = (repo / "tiny-bert/openvino_model.bin").stat().st_size
    assert json.loads((repo / "tiny-bert/embedding_config.json").read_text())["quant_mode"] is None
    replaced = export_cli("embeddings", "--source_model", str(sources["bert"]), "--model_name", "tiny-bert",
                          "--model_repository_path", str(repo), "--quant_mode", "int8", "--overwrite_models")
    assert replaced.returncode == 0, replaced.stderr[-2000:]
    texts = len(builtin_texts())
    assert texts > 100 and f"quantizing weights and activations to int8 with NNCF ({texts} texts)" in replaced.stdout
    assert json.loads((repo / "tiny-bert/embedding_config.json").read_text())["quant_mode"] == "int8"
    model = openvino.Core().read_model(repo / "tiny-bert/openvino_model.xml")
    assert any(op.get_type_name() == "FakeQuantize" for op in model.get_ops())
    assert (repo / "tiny-bert/openvino_model.bin").stat().st_size < plain_size
    config = json.loads((repo / "config.json").read_text())
    assert sorted(e["config"]["name"] for e in config["model_config_list"]) == sorted(names_before)  # once each
    assert [p.name for p in repo.iterdir() if p.name.startswith(".")] == []  # no staging folder left
