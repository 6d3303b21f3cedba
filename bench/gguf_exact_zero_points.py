"""An IR converted from a Q4_1 GGUF by openvino-genai, rewritten with each group's exact zero point (docs/models.md,
"GGUF files"): what the file's exact weights cost on OpenVINO's CPU kernels, and what they give (bench/perplexity.py).

Q4_1 stores a group of 32 weights as w = d·q + m; openvino-genai's reader keeps q and d and rounds -m/d to a 4-bit
integer zero point. Here the zero point becomes -m/d itself, as f16 (or f32), read from the GGUF. Each IR weight
constant is matched to its GGUF tensor by its rows' 4-bit values (the reader reorders the rows of the query and key
projections, so a tensor is found by the set of its rows, and each row's zero points follow it). Needs the `gguf`
package (llama.cpp's). Rewrites the folder's openvino_model.xml/.bin in place: run it on a copy.

    cp -r models/HuggingFaceTB/SmolLM2-135M-Instruct /tmp/exact
    GGUF=$(python -c 'from bench.hf_model import default_gguf; print(default_gguf())')
    python bench/gguf_exact_zero_points.py /tmp/exact "$GGUF"
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np


def _row_key(row: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(row, dtype=np.uint8).tobytes()).hexdigest()


def exact_zero_points(gguf_path: Path) -> dict[frozenset[str], dict[str, np.ndarray]]:
    """For each Q4_1 tensor: the set of its rows' keys -> each row's exact zero points (-m/d per group)."""
    from gguf import GGMLQuantizationType, GGUFReader

    tensors = {}
    for tensor in GGUFReader(str(gguf_path)).tensors:
        if tensor.tensor_type != GGMLQuantizationType.Q4_1:
            continue
        blocks = np.frombuffer(tensor.data.tobytes(), dtype=np.uint8).reshape(-1, 20)  # d f16, m f16, 16 bytes of q
        scale = blocks[:, 0:2].copy().view(np.float16).astype(np.float32).ravel()
        minimum = blocks[:, 2:4].copy().view(np.float16).astype(np.float32).ravel()
        packed = blocks[:, 4:]
        values = np.concatenate([packed & 15, packed >> 4], axis=1)  # q in order: low nibbles, then high ones
        rows = int(np.prod(tensor.shape[1:]))
        values, zero_points = values.reshape(rows, -1), (-minimum / scale).reshape(rows, -1)
        keys = [_row_key(row) for row in values]
        tensors[frozenset(keys)] = dict(zip(keys, zero_points, strict=True))
    return tensors


def _unpack_u4(packed: np.ndarray) -> np.ndarray:
    """OpenVINO's u4 layout as `get_data()` returns it: two values a byte, the low nibble first
    (openvino.helpers.packing.unpack_data reads the high nibble first, so its rows would match no GGUF row)."""
    packed = np.asarray(packed, dtype=np.uint8).ravel()
    values = np.empty(packed.size * 2, dtype=np.uint8)
    values[0::2], values[1::2] = packed & 15, packed >> 4
    return values


def rewrite(folder: Path, gguf_path: Path, zero_point_type: type = np.float16) -> tuple[int, int]:
    """(weights rewritten, Q4_1 tensors in the file)."""
    import openvino as ov

    exact = exact_zero_points(gguf_path)
    model = ov.Core().read_model(folder / "openvino_model.xml")
    rewritten = 0
    for op in model.get_ops():
        if op.get_type_name() != "Subtract":
            continue
        weights_convert, zero_point_convert = (op.input_value(i).get_node() for i in range(2))
        if weights_convert.get_type_name() != "Convert" or zero_point_convert.get_type_name() != "Convert":
            continue
        weights, zero_point = (node.input_value(0).get_node() for node in (weights_convert, zero_point_convert))
        if weights.get_type_name() != "Constant" or weights.get_element_type() != ov.Type.u4:
            continue
        shape = list(weights.get_output_shape(0))
        rows = _unpack_u4(weights.get_data()).reshape(shape[0], -1)
        keys = [_row_key(row) for row in rows]
        table = exact.get(frozenset(keys))
        if table is None:
            continue
        values = np.stack([table[key] for key in keys]).reshape(list(zero_point.get_output_shape(0)))
        constant = ov.opset13.constant(values.astype(zero_point_type))
        wanted = zero_point_convert.output(0).get_element_type()
        node = constant if constant.get_element_type() == wanted else ov.opset13.convert(constant, wanted)
        op.input(1).replace_source_output(node.output(0))
        rewritten += 1
    # Written beside, then moved over: the model's weights are mapped from the file being replaced.
    ov.save_model(model, folder / "exact.xml", compress_to_fp16=False)
    del model
    (folder / "exact.xml").replace(folder / "openvino_model.xml")
    (folder / "exact.bin").replace(folder / "openvino_model.bin")
    return rewritten, len(exact)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a copy of the IR folder openvino-genai converted the GGUF into")
    parser.add_argument("gguf", type=Path, help="the GGUF file it was converted from")
    parser.add_argument("--zero-point-type", choices=["f16", "f32"], default="f16")
    args = parser.parse_args()
    rewritten, total = rewrite(args.folder, args.gguf, {"f16": np.float16, "f32": np.float32}[args.zero_point_type])
    print(f"{rewritten} of the file's {total} Q4_1 tensors now have their exact zero points")
    return 0 if rewritten == total else 1


if __name__ == "__main__":
    sys.exit(main())
