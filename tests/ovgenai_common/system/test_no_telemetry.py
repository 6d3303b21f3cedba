"""The services report nothing to Intel: OpenVINO's Python package sends an event to Google Analytics when it is
imported (and writes a client id under ~/intel first), which these services must not do unless their user asks
(ovgenai_common/no_telemetry.py). Observed the way OpenVINO's reporting shows itself: a fresh HOME stays empty."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.servers import MODELS, ROOT, RemoteServer


def _python(code: str, home: Path) -> None:
    home.mkdir()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
                   check=True, timeout=120, capture_output=True)


def test_openvino_reports_its_import_where_nothing_blocks_it(tmp_path):
    """The control: this is what the services' check below would see if they reported."""
    _python("import openvino_genai", tmp_path / "home")
    assert (tmp_path / "home" / "intel").exists()


def test_model_preparation_reports_nothing(tmp_path):
    _python("import ovgenai_models.export, openvino_genai, openvino_tokenizers", tmp_path / "home")
    assert not (tmp_path / "home" / "intel").exists()


def test_the_backend_and_the_embedding_service_report_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "OVGENAI_CACHE_DIR": str(tmp_path / "cache")}
    with RemoteServer("ovgenai_server", ["--model", str(MODELS)], env=env) as backend:
        reply = httpx.post(backend.url + "/v1/completions", json={"model": "HuggingFaceTB/SmolLM2-135M-Instruct",
                                                                  "prompt": "Hello", "max_tokens": 2}, timeout=60)
        assert reply.status_code == 200, reply.text
    embedding_env = {**env, "EMBEDDING_MODEL_PATH": str(MODELS / "sentence-transformers/all-MiniLM-L6-v2")}
    with RemoteServer("ovgenai_services.embedding", env=embedding_env) as embedding:
        reply = httpx.post(embedding.url + "/v1/embeddings", json={"input": "hello"}, timeout=60)
        assert reply.status_code == 200, reply.text
    assert not (home / "intel").exists(), sorted(p.name for p in (home / "intel").iterdir())
