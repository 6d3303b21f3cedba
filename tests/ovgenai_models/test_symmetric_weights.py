"""symmetric_weights.py on a one-matmul model built here: weights whose every zero point is the midpoint become
signed codes without a Subtract and compute the same numbers; any other zero point leaves the model untouched."""

from __future__ import annotations

import numpy as np
import openvino
import pytest
from openvino import opset13 as ops

from ovgenai_models.symmetric_weights import symmetric_weights

ROWS, GROUPS, GROUP = 8, 2, 32


def _model(kind: str, points: np.ndarray) -> openvino.Model:
    """x @ W.T with W = scale · (codes − zero point), as openvino-genai's GGUF reader writes a quantized weight."""
    rng = np.random.default_rng(0)
    top = 16 if kind == "u4" else 256
    codes = rng.integers(0, top, (ROWS, GROUPS, GROUP)).astype(np.uint8)
    element = getattr(openvino.Type, kind)
    weight = ops.convert(ops.constant(codes, element), openvino.Type.f16)
    zero = ops.convert(ops.constant(points.astype(np.uint8), element), openvino.Type.f16)
    scale = ops.constant(rng.uniform(0.01, 0.1, (ROWS, GROUPS, 1)).astype(np.float16))
    matrix = ops.reshape(ops.multiply(ops.subtract(weight, zero), scale), [ROWS, GROUPS * GROUP], False)
    x = ops.parameter([1, GROUPS * GROUP], openvino.Type.f32, name="x")
    return openvino.Model([ops.matmul(x, ops.convert(matrix, openvino.Type.f32), False, True)], [x])


def _run(folder) -> np.ndarray:
    compiled = openvino.Core().compile_model(str(folder / "openvino_model.xml"), "CPU",
                                             {"INFERENCE_PRECISION_HINT": "f32"})
    x = np.linspace(-1, 1, GROUPS * GROUP, dtype=np.float32).reshape(1, -1)
    return compiled(x)[0]


def _types(folder) -> set[str]:
    model = openvino.Core().read_model(str(folder / "openvino_model.xml"))
    return {n.get_type_name() for n in model.get_ops()} | {
        n.get_output_element_type(0).get_type_name() for n in model.get_ops() if n.get_type_name() == "Constant"}


@pytest.mark.parametrize(("kind", "midpoint", "signed"), [("u4", 8, "i4"), ("u8", 128, "i8")])
def test_midpoint_zero_points_become_signed_codes_with_the_same_numbers(tmp_path, kind, midpoint, signed):
    openvino.save_model(_model(kind, np.full((ROWS, GROUPS, 1), midpoint)), str(tmp_path / "openvino_model.xml"),
                        compress_to_fp16=False)
    before = _run(tmp_path)
    assert symmetric_weights(tmp_path) == 1
    assert np.array_equal(_run(tmp_path), before)
    assert signed in _types(tmp_path) and "Subtract" not in _types(tmp_path)
    assert symmetric_weights(tmp_path) == 0  # nothing left to do


def test_any_other_zero_point_leaves_the_model_as_it_was(tmp_path):
    points = np.full((ROWS, GROUPS, 1), 8)
    points[3, 1, 0] = 7  # one group of Q4_1 whose rounded minimum is not the midpoint
    openvino.save_model(_model("u4", points), str(tmp_path / "openvino_model.xml"), compress_to_fp16=False)
    written = (tmp_path / "openvino_model.bin").read_bytes()
    assert symmetric_weights(tmp_path) == 0
    assert (tmp_path / "openvino_model.bin").read_bytes() == written and "Subtract" in _types(tmp_path)
