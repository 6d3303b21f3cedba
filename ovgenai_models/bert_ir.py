"""A BERT encoder as OpenVINO IR, built from its safetensors weights with OpenVINO's own graph API: no torch.

The default embedding model (all-MiniLM-L6-v2, a 6-layer BERT) needs no conversion tools this way, so the first
`make run` downloads no PyTorch. The graph is the one optimum-intel exports for `feature-extraction`: inputs
`input_ids`, `attention_mask` and `token_type_ids`, output `last_hidden_state`; the pooling and normalization are
openvino-genai's TextEmbeddingPipeline's (embedding_config.json), as for every exported encoder. Its vectors agree
with the torch export to cosine 0.9999 or better (tests/ovgenai_models/system/test_bert_ir.py).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ExportError

_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a .safetensors file as float32 (or int64) arrays. The format is an 8-byte header length, a
    JSON header of names, dtypes, shapes and offsets, then the raw little-endian data."""
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
        data = handle.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ExportError(f"'{path}': tensor {name} is {entry['dtype']}, which this reader does not take.")
        start, end = entry["data_offsets"]
        array = np.frombuffer(data[start:end], dtype=dtype).reshape(entry["shape"])
        if entry["dtype"] == "BF16":  # bfloat16 is the top half of a float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array.astype(np.float32) if array.dtype != np.int64 else array
    return tensors


def supported(config: dict[str, Any]) -> bool:
    """Whether this builder makes the model of `config`: a BERT with absolute positions and exact GELU."""
    return (config.get("model_type") == "bert" and config.get("position_embedding_type", "absolute") == "absolute"
            and config.get("hidden_act", "gelu") == "gelu")


class _Graph:
    """The opset calls of one encoder, with its weights by name."""

    def __init__(self, weights: dict[str, np.ndarray], prefix: str, eps: float):
        import openvino.opset13 as ops

        self.ops, self.weights, self.prefix, self.eps = ops, weights, prefix, eps

    def const(self, name: str):
        key = self.prefix + name
        if key not in self.weights:
            raise ExportError(f"the checkpoint has no tensor '{key}' (is it a BERT model?)")
        return self.ops.constant(self.weights[key])

    def linear(self, x, name: str):
        """x @ W.T + b, with W as stored: [out, in]."""
        product = self.ops.matmul(x, self.const(f"{name}.weight"), transpose_a=False, transpose_b=True)
        return self.ops.add(product, self.const(f"{name}.bias"))

    def layer_norm(self, x, name: str):
        normalized = self.ops.mvn(x, self.ops.constant(np.array([-1], np.int64)), True, self.eps, "inside_sqrt")
        return self.ops.add(self.ops.multiply(normalized, self.const(f"{name}.weight")), self.const(f"{name}.bias"))


def bert_encoder(config: dict[str, Any], weights: dict[str, np.ndarray]):
    """The openvino.Model of a BertModel's encoder (no pooler): last_hidden_state [batch, sequence, hidden]."""
    import openvino
    import openvino.opset13 as ops

    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
    graph = _Graph(weights, prefix, float(config.get("layer_norm_eps", 1e-12)))
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    head_size = hidden // heads

    def parameter(name: str):
        node = ops.parameter([-1, -1], openvino.Type.i64, name=name)
        node.output(0).set_names({name})
        return node

    input_ids, attention_mask, token_type_ids = (parameter(n) for n in
                                                  ("input_ids", "attention_mask", "token_type_ids"))
    zero = ops.constant(np.array(0, np.int64))
    one = ops.constant(np.array(1, np.int64))
    # Embeddings: words + positions 0..S-1 + token types, then LayerNorm.
    sequence = ops.gather(ops.shape_of(input_ids), one, zero)
    positions = ops.range(zero, sequence, one, openvino.Type.i64)
    x = ops.gather(graph.const("embeddings.word_embeddings.weight"), input_ids, zero)
    x = ops.add(x, ops.gather(graph.const("embeddings.position_embeddings.weight"), positions, zero))
    x = ops.add(x, ops.gather(graph.const("embeddings.token_type_embeddings.weight"), token_type_ids, zero))
    x = graph.layer_norm(x, "embeddings.LayerNorm")
    # The padding mask as BERT adds it to the attention scores: 0 where attended, the float minimum elsewhere,
    # shaped [batch, 1, 1, sequence] to broadcast over heads and queries.
    mask = ops.convert(ops.unsqueeze(attention_mask, ops.constant(np.array([1, 2], np.int64))), openvino.Type.f32)
    bias = ops.multiply(ops.subtract(ops.constant(np.float32(1.0)), mask),
                        ops.constant(np.float32(np.finfo(np.float32).min)))
    split_heads = ops.constant(np.array([0, 0, heads, head_size], np.int64))
    to_heads = ops.constant(np.array([0, 2, 1, 3], np.int64))
    merged = ops.constant(np.array([0, 0, hidden], np.int64))
    scale = ops.constant(np.float32(1.0 / np.sqrt(head_size)))

    def heads_of(tensor):
        return ops.transpose(ops.reshape(tensor, split_heads, special_zero=True), to_heads)

    for index in range(int(config["num_hidden_layers"])):
        layer = f"encoder.layer.{index}"
        q, k, v = (heads_of(graph.linear(x, f"{layer}.attention.self.{n}")) for n in ("query", "key", "value"))
        context = ops.scaled_dot_product_attention(q, k, v, bias, scale, causal=False)
        context = ops.reshape(ops.transpose(context, to_heads), merged, special_zero=True)
        x = graph.layer_norm(ops.add(graph.linear(context, f"{layer}.attention.output.dense"), x),
                             f"{layer}.attention.output.LayerNorm")
        intermediate = ops.gelu(graph.linear(x, f"{layer}.intermediate.dense"), "erf")
        x = graph.layer_norm(ops.add(graph.linear(intermediate, f"{layer}.output.dense"), x),
                             f"{layer}.output.LayerNorm")
    x.output(0).set_names({"last_hidden_state"})
    result = ops.result(x)
    return openvino.Model([result], [input_ids, attention_mask, token_type_ids], "bert_encoder")


def write_bert_ir(source: Path, folder: Path, compress_to_fp16: bool = True) -> None:
    """`source` (config.json and model.safetensors of a BERT checkpoint) as openvino_model.xml/.bin in `folder`,
    its weights stored in fp16 (computed in the CPU's own precision, as optimum-intel's fp16 export)."""
    import openvino

    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    if not supported(config):
        raise ExportError(f"'{source}' is not a BERT model with absolute positions and GELU; it needs the export "
                          "tools.")
    model = bert_encoder(config, read_safetensors(source / "model.safetensors"))
    openvino.save_model(model, str(folder / "openvino_model.xml"), compress_to_fp16=compress_to_fp16)
