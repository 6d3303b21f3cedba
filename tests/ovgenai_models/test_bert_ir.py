"""The BERT encoder built without torch (bert_ir.py), on a tiny checkpoint written here with numpy: safetensors read
as the format says (F32, F16, BF16), the graph's inputs and output as optimum-intel exports them, models it does not
make refused. Its vectors against the torch export, on the default model: system/test_bert_ir.py."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from ovgenai_models.bert_ir import bert_encoder, read_safetensors, supported
from ovgenai_models.errors import ExportError

CONFIG = {"model_type": "bert", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 2,
          "intermediate_size": 16, "vocab_size": 20, "max_position_embeddings": 16, "type_vocab_size": 2}


def write_safetensors(path, tensors: dict[str, np.ndarray], dtype: str = "F32") -> None:
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, array in tensors.items():
        if dtype == "BF16":
            data = (np.asarray(array, np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
        else:
            data = np.asarray(array, np.float16 if dtype == "F16" else np.float32).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))


def tiny_weights(config=CONFIG, prefix: str = "") -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    h, i = config["hidden_size"], config["intermediate_size"]
    shapes = {"embeddings.word_embeddings.weight": (config["vocab_size"], h),
              "embeddings.position_embeddings.weight": (config["max_position_embeddings"], h),
              "embeddings.token_type_embeddings.weight": (config["type_vocab_size"], h),
              "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,)}
    for layer in range(config["num_hidden_layers"]):
        base = f"encoder.layer.{layer}"
        for name in ("query", "key", "value"):
            shapes |= {f"{base}.attention.self.{name}.weight": (h, h), f"{base}.attention.self.{name}.bias": (h,)}
        shapes |= {f"{base}.attention.output.dense.weight": (h, h), f"{base}.attention.output.dense.bias": (h,),
                   f"{base}.attention.output.LayerNorm.weight": (h,), f"{base}.attention.output.LayerNorm.bias": (h,),
                   f"{base}.intermediate.dense.weight": (i, h), f"{base}.intermediate.dense.bias": (i,),
                   f"{base}.output.dense.weight": (h, i), f"{base}.output.dense.bias": (h,),
                   f"{base}.output.LayerNorm.weight": (h,), f"{base}.output.LayerNorm.bias": (h,)}
    return {prefix + name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


@pytest.mark.parametrize(("dtype", "tolerance"), [("F32", 0), ("F16", 1e-3), ("BF16", 1e-2)])
def test_safetensors_are_read_as_float32_in_every_float_format(tmp_path, dtype, tolerance):
    tensors = {"a": np.array([[1.5, -2.25], [0.1, 3.0]], np.float32), "b": np.arange(3, dtype=np.float32)}
    write_safetensors(tmp_path / "w.safetensors", tensors, dtype)
    read = read_safetensors(tmp_path / "w.safetensors")
    for name, array in tensors.items():
        assert read[name].dtype == np.float32 and read[name].shape == array.shape
        np.testing.assert_allclose(read[name], array, rtol=tolerance, atol=tolerance)


def test_an_unknown_tensor_type_is_refused_by_name(tmp_path):
    header = json.dumps({"w": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}).encode()
    (tmp_path / "w.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0")
    with pytest.raises(ExportError, match="tensor w is F8_E4M3"):
        read_safetensors(tmp_path / "w.safetensors")


@pytest.mark.parametrize("prefix", ["", "bert."])  # a BertModel's own names, or a task model's
def test_the_graph_has_optimum_intels_inputs_and_output(prefix):
    import openvino

    model = bert_encoder(CONFIG, tiny_weights(prefix=prefix))
    assert [i.get_any_name() for i in model.inputs] == ["input_ids", "attention_mask", "token_type_ids"]
    assert all(i.get_element_type() == openvino.Type.i64 for i in model.inputs)
    [output] = model.outputs
    assert output.get_any_name() == "last_hidden_state" and output.get_partial_shape()[2] == CONFIG["hidden_size"]


def test_only_absolute_position_gelu_berts_are_built():
    assert supported(CONFIG) and supported({**CONFIG, "hidden_act": "gelu", "position_embedding_type": "absolute"})
    assert not supported({**CONFIG, "model_type": "xlm-roberta"})
    assert not supported({**CONFIG, "position_embedding_type": "relative_key"})
    assert not supported({**CONFIG, "hidden_act": "gelu_new"})
    with pytest.raises(ExportError, match="no tensor 'encoder.layer.1.output.dense.weight'"):
        weights = tiny_weights()
        del weights["encoder.layer.1.output.dense.weight"]
        bert_encoder(CONFIG, weights)
