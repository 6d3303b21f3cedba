"""TorchServe users' own model and config file: MODEL_PATH naming a Transformers checkpoint is exported to OpenVINO
IR at start (once: the next start serves the cached export) and served; config.properties (TS_CONFIG_FILE) places
the ports, with the environment winning over it."""

from __future__ import annotations

import httpx

from tests.support.servers import RemoteServer, free_port
from tests.support.tiny_models import build_tiny_llama

EOS = "<|endoftext|>"


def test_a_transformers_checkpoint_is_exported_at_start_then_served_from_the_cache(tmp_path):
    checkpoint = build_tiny_llama(tmp_path / "tiny-llama")
    management, metrics, grpc_port = free_port(), free_port(), free_port()
    config = tmp_path / "config.properties"
    config.write_text(f"inference_address=http://127.0.0.1:1\nmanagement_address=http://127.0.0.1:{management}\n"
                      f"metrics_address=http://127.0.0.1:{metrics}\ngrpc_inference_port={grpc_port}\n"
                      "model_store=/home/model-server/model-store\n")
    # RemoteServer sets PORT and HOST: the environment wins over the file's inference_address.
    env = {"MODEL_PATH": str(checkpoint), "OVGENAI_CACHE_DIR": str(tmp_path / "cache"),
           "TS_CONFIG_FILE": str(config), "MAX_NEW_TOKENS": "6"}
    with RemoteServer("ovgenai_server.torchserve", env=env, health_path="/ping", startup_timeout=600) as server:
        body = httpx.post(f"{server.url}/predictions/tiny-llama", json={"text": "the quick brown fox"},
                          timeout=120)
        assert body.status_code == 200 and body.text.endswith(EOS), body.text
        models = httpx.get(f"http://127.0.0.1:{management}/models", timeout=10).json()
        assert [m["modelName"] for m in models["models"]] == ["tiny-llama"]  # MODEL_NAME: the folder's name
        assert httpx.get(f"http://127.0.0.1:{metrics}/metrics", timeout=10).status_code == 200
        assert "exporting it to OpenVINO IR (fp16 weights)" in server.logs()
    [exported] = (tmp_path / "cache" / "checkpoints").glob("*/model/openvino_model.xml")
    with RemoteServer("ovgenai_server.torchserve", env=env, health_path="/ping", startup_timeout=300) as again:
        assert "serving its OpenVINO IR exported earlier" in again.logs()
        assert httpx.post(f"{again.url}/predictions/tiny-llama", json={"text": "fox"}, timeout=120).status_code == 200
    assert exported.is_file()


def test_a_checkpoint_without_the_export_tools_stops_with_what_to_install(tmp_path):
    import subprocess
    import sys

    from tests.support.servers import ROOT

    checkpoint = build_tiny_llama(tmp_path / "tiny-llama")
    blocked = ("import sys\nfor name in ('torch', 'optimum', 'nncf', 'transformers'):\n    sys.modules[name] = None\n"
               "from ovgenai_server.torchserve.__main__ import main\nmain([])")
    result = subprocess.run([sys.executable, "-c", blocked], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={"PATH": "/usr/bin:/bin", "MODEL_PATH": str(checkpoint), "PORT": str(free_port()),
                                 "OVGENAI_CACHE_DIR": str(tmp_path / "cache")})
    assert result.returncode == 2, result.stderr[-2000:]
    assert "is a Transformers checkpoint" in result.stderr and "make export-tools" in result.stderr
