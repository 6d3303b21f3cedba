"""GGUF's symmetric 4-bit weights stored as symmetric: openvino-genai's GGUF reader writes Q4_0 (w = d·(q − 8)) as
unsigned 4-bit codes with a zero point of 8 in every group, which the CPU plugin computes as any asymmetric weight,
subtracting a zero point per group. Flipping each code's top bit gives q − 8 as a signed 4-bit value exactly, and the
weight no longer needs its zero point: the same numbers, a faster kernel (bench/results.md, "One stream")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .conversion import replace_model

# A zero point of a code's midpoint in every group, and the XOR that turns its packed codes into signed ones.
_MIDPOINTS = {"u4": (8, 0x88, "i4"), "u8": (128, 0x80, "i8")}


def symmetric_weights(folder: Path) -> int:
    """Rewrite the folder's openvino_model.xml with its midpoint-zero-point weights as signed ones; how many."""
    import openvino

    core = openvino.Core()
    model = core.read_model(str(folder / "openvino_model.xml"))
    rewritten = sum(_make_symmetric(node) for node in model.get_ordered_ops() if node.get_type_name() == "Subtract")
    if rewritten:
        replace_model(folder, model, compress_to_fp16=False)
    del model
    del core
    return rewritten


def _make_symmetric(subtract: Any) -> bool:
    """Subtract(Convert(codes), Convert(zero points)) with every zero point the midpoint -> Convert(signed codes)."""
    import numpy as np
    import openvino
    from openvino import opset13

    codes_convert, points_convert = (subtract.input_value(i).get_node() for i in range(2))
    if codes_convert.get_type_name() != "Convert" or points_convert.get_type_name() != "Convert":
        return False
    codes, points = codes_convert.input_value(0).get_node(), points_convert.input_value(0).get_node()
    if codes.get_type_name() != "Constant" or points.get_type_name() != "Constant":
        return False
    kind = codes.get_output_element_type(0).get_type_name()
    if kind not in _MIDPOINTS or points.get_output_element_type(0).get_type_name() != kind:
        return False
    midpoint, flip, signed = _MIDPOINTS[kind]
    if not np.all(np.asarray(points.get_vector()) == midpoint):
        return False
    tensor = openvino.Tensor(getattr(openvino.Type, signed), codes.get_output_shape(0))
    packed = tensor.data.view(np.uint8).reshape(-1)
    np.bitwise_xor(np.asarray(codes.data).view(np.uint8).reshape(-1), flip, out=packed)
    signed_codes = opset13.convert(openvino.op.Constant(tensor), codes_convert.get_output_element_type(0))
    subtract.output(0).replace(signed_codes.output(0))
    return True
