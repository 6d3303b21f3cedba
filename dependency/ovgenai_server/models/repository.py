"""Writing an OVMS model repository: graph.pbtxt next to each model, entries merged into config.json.

Writes are atomic (temporary file, then rename), so a crash never leaves a half-written config.json, and a
model is registered only after its folder is complete.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

GRAPH_TEMPLATE = """input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"

node: {{
  name: "LLMExecutor"
  calculator: "HttpLLMCalculator"
  input_stream: "LOOPBACK:loopback"
  input_stream: "HTTP_REQUEST_PAYLOAD:input"
  input_side_packet: "LLM_NODE_RESOURCES:llm"
  output_stream: "LOOPBACK:loopback"
  output_stream: "HTTP_RESPONSE_PAYLOAD:output"
  input_stream_info: {{
    tag_index: 'LOOPBACK:0',
    back_edge: true
  }}
  node_options: {{
      [type.googleapis.com / mediapipe.LLMCalculatorOptions]: {{
{options}
      }}
  }}
  input_stream_handler {{
    input_stream_handler: "SyncSetInputStreamHandler",
    options {{
      [mediapipe.SyncSetInputStreamHandlerOptions.ext] {{
        sync_set {{
          tag_index: "LOOPBACK:0"
        }}
      }}
    }}
  }}
}}
"""


def _pbtxt_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(str(value))


def graph_pbtxt(options: dict[str, Any]) -> str:
    lines = [f"          {key}: {_pbtxt_value(value)}," for key, value in options.items() if value is not None]
    if lines:
        lines[-1] = lines[-1].rstrip(",")
    return GRAPH_TEMPLATE.format(options="\n".join(lines))


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def make_public(path: Path) -> None:
    """Give a staged file, or a staged folder and everything in it, the modes a plain write would have had.

    mkstemp and mkdtemp create private entries (0600, 0700) so that nobody reads a half-written model; once it is
    complete, it must be readable by whoever serves it, such as a container's non-root user reading a mounted
    model repository (0644 files and 0755 folders under the usual umask)."""
    mask = current_umask()
    if path.is_file():
        path.chmod(0o666 & ~mask)
        return
    path.chmod(0o777 & ~mask)
    for root, folders, files in os.walk(path):
        for name in folders:
            (Path(root) / name).chmod(0o777 & ~mask)
        for name in files:
            (Path(root) / name).chmod(0o666 & ~mask)


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        make_public(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_config(config_path: Path) -> dict[str, Any]:
    if not config_path.is_file():
        return {"mediapipe_config_list": [], "model_config_list": []}
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config.setdefault("mediapipe_config_list", [])
    config.setdefault("model_config_list", [])
    return config


def registered(config_path: Path, name: str) -> bool:
    config = read_config(config_path)
    names = {e.get("name") for e in config["mediapipe_config_list"]}
    names |= {e.get("config", {}).get("name") for e in config["model_config_list"]}
    return name in names


def register(config_path: Path, name: str, base_path: str, *, llm: bool, overwrite: bool = False) -> None:
    """Add (or with overwrite, replace) one model entry, keeping every other entry as it was."""
    config = read_config(config_path)
    mediapipe = [e for e in config["mediapipe_config_list"] if e.get("name") != name]
    models = [e for e in config["model_config_list"] if e.get("config", {}).get("name") != name]
    if not overwrite and (len(mediapipe) != len(config["mediapipe_config_list"]) or len(models) != len(
        config["model_config_list"]
    )):
        raise FileExistsError(f"'{name}' is already registered in {config_path}; pass --overwrite_models.")
    if llm:
        mediapipe.append({"name": name, "base_path": base_path})
    else:
        models.append({"config": {"name": name, "base_path": base_path}})
    config["mediapipe_config_list"], config["model_config_list"] = mediapipe, models
    atomic_write(config_path, json.dumps(config, indent=4) + "\n")
