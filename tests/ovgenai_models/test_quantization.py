"""What weight quantization is asked of optimum-intel for each weight format, and what an int4 group size that
does not fit a model's layers is answered with. (The quantized models themselves: system/test_export.py.)"""

from __future__ import annotations

import pytest

from ovgenai_models.quantization import group_size_misfit, weight_quantization


@pytest.mark.parametrize(
    ("group_size", "message", "remedy"),
    [
        (128, '"a/MatMul" (channel size: 576)\n\t"b/MatMul" (channel size: 1600)', "--group_size 64,"),
        (64, '"a/MatMul" (channel size: 100)', "Export it with --weight-format int8"),
        (128, "no sizes named", "Export it with --weight-format int8"),
    ],
)
def test_group_size_misfit_names_the_largest_group_that_divides_every_layer(group_size, message, remedy):
    text = group_size_misfit(group_size, message)
    assert f"int4 in groups of {group_size} does not fit this model" in text and remedy in text


def test_int4_and_int8_are_asked_as_given_and_float_formats_are_not_quantized():
    assert weight_quantization("m", "int4", sym=True, group_size=64, ratio=0.8) == {
        "bits": 4, "sym": True, "group_size": 64, "ratio": 0.8}
    assert weight_quantization("m", "int8") == {"bits": 8, "sym": False}
    assert weight_quantization("m", "fp16") is None and weight_quantization("m", "fp32") is None
