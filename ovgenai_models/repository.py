"""The OVMS model repository format, read and written in one place.

A repository is a `config.json` whose `mediapipe_config_list` (and `model_config_list`) entries name model
folders; each folder may hold a `graph.pbtxt` whose `LLMCalculatorOptions` node options set that model's engine
options (`models_path`, `cache_size`, `max_num_seqs`, ...). The backend reads it; model preparation writes it.

Writes are atomic (temporary file, then rename), so a crash never leaves a half-written config.json, and a model
is registered only after its folder is complete.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Writing: graph.pbtxt next to each model, entries merged into config.json. ---------------------------------

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


# Enum values of the nested messages, written bare as text format writes them.
_ENUM_VALUES = frozenset({"SUM", "NORM_SUM", "RANDOM", "ZEROS", "ONES", "MEAN", "ALTERNATING"})


def _pbtxt_value(value: Any) -> str:
    if isinstance(value, dict):  # a nested message, e.g. cache_eviction_config
        return "{ " + " ".join(f"{key}: {_pbtxt_value(item)}" for key, item in value.items()) + " }"
    if isinstance(value, str) and value in _ENUM_VALUES:
        return value
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


def serve_only(repository: Path, llm: str, draft: str | None) -> None:
    """Make `llm` the repository's only LLM (config.json's mediapipe list), with `draft`'s folder as its draft in
    its graph.pbtxt (or none), so that a backend serving the repository (lifecycle.py watches both files) loads it
    and unloads the others while it runs. The other models' folders stay, for a later switch back; the graph is
    written before config.json, so that the model is loaded with its draft."""
    graph = repository / llm / "graph.pbtxt"
    if graph.is_file():
        options = parse_graph_options(graph.read_text(encoding="utf-8"))
        wanted = os.path.relpath(repository / draft, repository / llm) if draft else None
        if options.get("draft_models_path") != wanted:
            options["draft_models_path"] = wanted  # None: left out of the graph
            atomic_write(graph, graph_pbtxt(options))
    config_path = repository / "config.json"
    config = read_config(config_path)
    listed = [entry for entry in config["mediapipe_config_list"] if entry.get("name") == llm] or [
        {"name": llm, "base_path": llm}]  # a folder prepared but not listed (by hand, or an older preparation)
    if listed != config["mediapipe_config_list"]:
        config["mediapipe_config_list"] = listed
        atomic_write(config_path, json.dumps(config, indent=4) + "\n")


# Reading: what a repository serves. ----------------------------------------------------------------------------

# Text format: fields apart by blanks, commas or semicolons, `#` comments to the end of the line; a value is a quoted
# string or a bare word (a number, true or false, an enum name), a nested message is `key { ... }` or `key: { ... }`.
_SKIPPED = r"(?:[\s,;]|\#[^\n]*)*"
_VALUE = r"""(?P<value>"(?:[^"\\]|\\.)*"|'[^']*'|[\w.+-]+)"""
_FIELD = re.compile(_SKIPPED + r"(?:(?P<close>})|(?P<key>\w+)\s*(?::\s*)?(?:(?P<open>\{)|" + _VALUE + "))")
_END = re.compile(_SKIPPED + r"\Z")


class ModelRepositoryError(ValueError):
    pass


@dataclass(frozen=True)
class LLMEntry:
    """One text-generation model of a repository: its served name, what to load, and its graph.pbtxt options."""

    name: str
    path: Path  # an OpenVINO IR folder or a .gguf file
    options: dict[str, Any]


def repository_config(path: Path) -> Path | None:
    """The config.json that makes `path` a repository (the file itself or one in the folder), else None."""
    if path.is_file() and path.suffix == ".json":
        return path
    if path.is_dir() and (path / "config.json").is_file() and not language_model_xml(path).is_file():
        return path / "config.json"
    return None


def parse_graph_options(text: str) -> dict[str, Any]:
    """The `node_options` of the LLM node of a graph.pbtxt, as Python values; ModelRepositoryError for text that
    cannot be read (rather than options silently left out)."""
    start = text.find("LLMCalculatorOptions")
    opening = text.find("{", start)
    if start < 0 or opening < 0:
        return {}
    options, _ = _graph_message(text, opening + 1)
    return options


def _graph_message(text: str, position: int) -> tuple[dict[str, Any], int]:
    """The fields of one text-format message from `position` up to its closing brace (or the end): values, and
    nested messages (`cache_eviction_config: { start_size: 32 ... }`) as dicts."""
    fields: dict[str, Any] = {}
    while True:
        match = _FIELD.match(text, position)
        if match is None:
            if _END.match(text, position):
                return fields, len(text)
            unreadable = text[position:].strip().splitlines()[0][:60]
            raise ModelRepositoryError(f"the LLM node's options cannot be read from '{unreadable}'")
        position = match.end()
        if match.group("close"):
            return fields, position
        if match.group("open"):
            fields[match.group("key")], position = _graph_message(text, position)
        elif match.group("value") is not None:
            fields[match.group("key")] = _graph_value(match.group("value"))


def _graph_value(raw: str) -> Any:
    if raw[0] in "\"'":
        return raw[1:-1].encode().decode("unicode_escape")
    if raw in ("true", "false"):
        return raw == "true"
    try:
        return int(raw)
    except ValueError:
        try:
            return float(raw)
        except ValueError:
            return raw


# The language model of an IR folder: an LLM's, or a vision-language model's (which has more models beside it).
LANGUAGE_MODELS = ("openvino_model.xml", "openvino_language_model.xml")


def language_model_xml(folder: Path) -> Path:
    return next((folder / name for name in LANGUAGE_MODELS if (folder / name).is_file()), folder / LANGUAGE_MODELS[0])


def is_vision_model(folder: Path) -> bool:
    """A vision-language model (optimum-intel's export: its images go through a vision embeddings model)."""
    return (folder / "openvino_vision_embeddings_model.xml").is_file()


def model_file(folder: Path) -> Path:
    """The loadable thing inside a model folder: the folder for IR, or its single .gguf file."""
    if language_model_xml(folder).is_file():
        return folder
    ggufs = sorted(folder.glob("*.gguf"))
    if len(ggufs) == 1:
        return ggufs[0]
    if not folder.exists():
        raise ModelRepositoryError(f"Model path '{folder}' does not exist.")
    raise ModelRepositoryError(
        f"'{folder}' holds neither an OpenVINO IR model (openvino_model.xml) nor exactly one .gguf file."
    )


def llm_entries(config_path: Path) -> list[LLMEntry]:
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ModelRepositoryError(f"'{config_path}' is not valid JSON: {error}") from error
    root = config_path.parent
    # LLMs are mediapipe graphs in OVMS; `model_config_list` holds the other models (embeddings, rerankers),
    # which the backend leaves to the embedding service.
    entries = []
    for entry in config.get("mediapipe_config_list", []):
        name = entry.get("name")
        if not name:
            raise ModelRepositoryError(f"An entry of '{config_path}' has no 'name'.")
        folder = root / entry.get("base_path", name)
        graph = folder / entry.get("graph_path", "graph.pbtxt")  # an absolute graph_path stays as it is
        graph_text = graph.read_text(encoding="utf-8") if graph.is_file() else ""
        if graph_text and "LLMCalculator" not in graph_text:
            continue  # an embeddings or rerank graph
        try:
            options = parse_graph_options(graph_text)
        except ModelRepositoryError as error:
            raise ModelRepositoryError(f"'{graph}': {error}.") from None
        models_path = folder / options.pop("models_path", "./")
        if "draft_models_path" in options:  # OVMS's speculative decoding draft, relative to the graph
            draft = Path(os.path.normpath(folder / str(options["draft_models_path"])))
            options["draft_models_path"] = str(model_file(draft) if draft.is_dir() else draft)
        entries.append(LLMEntry(name, model_file(models_path) if models_path.is_dir() else models_path, options))
    if not entries:
        raise ModelRepositoryError(f"'{config_path}' lists no text-generation models.")
    return entries
