"""The Hugging Face Hub as hub.py uses it, through the real huggingface_hub client and a Hub on loopback
(tests/support/hub.py, conftest.py): a transfer cut mid-way and resumed, the Hub's cache reused by a second
repository, a GGUF repository's files listed when none was chosen, gated repositories and OPEA's token name, missing
repositories and wrong revisions named; and OVMS's and vLLM's command lines fetching from it. What each kind of
repository becomes: test_pull.py; `prepare` with Hub models: test_prepare.py."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ovgenai_models.defaults import LLM_FILE
from ovgenai_models.repository import registered
from tests.ovgenai_models.system.hub_models import last_error, prepare
from tests.support.servers import ROOT, RemoteServer, free_port


def test_a_cut_transfer_resumes_with_a_range_request(pulled, made, hub):
    first, second, *more = [r for r in hub.gets(LLM_FILE) if "/test-org/SmolLM2-135M-Instruct-GGUF/" in r.path]
    assert (first.range, first.status, second.status, more) == (None, 200, 206, [])
    resumed_at = int(second.range.removeprefix("bytes=").removesuffix("-"))
    assert 0 < resumed_at <= pulled["cut"]  # from what it had, not from the start
    [cached] = Path(pulled["env"]["HF_HOME"], "hub").glob(f"models--test-org--SmolLM2-*/snapshots/*/{LLM_FILE}")
    assert filecmp.cmp(cached, made["gguf"][LLM_FILE], shallow=False)  # complete and intact


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




# A disk that fills during the first write of a download: huggingface_hub's transfer writes a block, then the disk
# is full (the error as the kernel gives it).
FULL_DISK = """import errno, sys
import huggingface_hub.file_download as download
def http_get(url, temp_file, **kwargs):
    temp_file.write(b"G" * 4096)
    raise OSError(errno.ENOSPC, "No space left on device")
download.http_get = http_get
from ovgenai_models.__main__ import main
sys.exit(main(sys.argv[1:]))"""


def test_a_disk_that_fills_during_a_download_is_said_with_the_size_and_the_place(hub, made, tmp_path):
    env = hub.env(tmp_path / "hf")
    result = subprocess.run(
        [sys.executable, "-c", FULL_DISK, "text_generation", "--source_model",
         "test-org/SmolLM2-135M-Instruct-GGUF:Q4_1", "--model_repository_path", str(tmp_path / "repo")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, **env})
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-3000:]
    error = result.stderr.strip().splitlines()[-1]
    size = made["gguf"][LLM_FILE].stat().st_size
    assert "Traceback" not in result.stderr
    assert ("error: The disk ran out of space while downloading 'test-org/SmolLM2-135M-Instruct-GGUF' into the "
            f"Hub's download cache. It needs about {size / 1e6:,.0f} MB on the disk of {env['HF_HOME']}/hub") in error
    assert "HF_HOME" in error and not (tmp_path / "repo" / "test-org").exists()
