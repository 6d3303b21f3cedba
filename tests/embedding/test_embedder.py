"""The embedder over a tiny OpenVINO model built here, whose hidden state for a token is [its id, its position id + its
token type id], and a tokenizer that gives each character its code between a start (1) and an end (2) token: each
pooling picks or averages the rows it should, padding never counts, one encoding gives the count and the input, a
text over its request's limit is not embedded, a text over the model's length (or over its request's cut) is cut
from that encoding with its end token kept (or encoded again where the tokenizer cuts otherwise), and a call of more
tokens than a batch runs in several inferences. The real model against openvino-genai's pipeline:
system/test_embedder.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ovgenai_services.embedding.embedder import (
    NARROW_QUERY_TOKENS,
    WIDE_QUERY_TOKENS,
    Embedder,
    default_query_tokens,
    end_tokens,
    f32_weights,
    padding_is_free,
    runs,
    widens_weights_per_call,
)
from ovgenai_services.embedding.fast_tokenizer import SHORT_CHARACTERS

START, END = 1, 2


class CharTokenizer:
    """Right-pads with 0; `calls` records each encode's texts and cut."""

    def __init__(self):
        self.calls: list[tuple[list[str], int | None]] = []

    def get_pad_token_id(self):
        return 0

    def encode(self, texts, max_length=None, truncation=False, padding_side=None):
        assert padding_side == "right"
        self.calls.append((list(texts), max_length if truncation else None))
        rows = [[START, *map(ord, text), END] for text in texts]
        if truncation and max_length:
            rows = [row if len(row) <= max_length else self.cut(row, max_length) for row in rows]
        width = max(map(len, rows))
        ids = np.array([row + [0] * (width - len(row)) for row in rows], dtype=np.int64)
        mask = np.array([[1] * len(row) + [0] * (width - len(row)) for row in rows], dtype=np.int64)
        return SimpleNamespace(input_ids=SimpleNamespace(data=ids), attention_mask=SimpleNamespace(data=mask))

    @staticmethod
    def cut(row, max_length):
        return [*row[:max_length - 1], END]


class KeepsTheEnd(CharTokenizer):
    """Cuts a text to its start token and its last tokens: not a cut the embedder can make from the whole encoding."""

    @staticmethod
    def cut(row, max_length):
        return [START, *row[len(row) - max_length + 1:]]


def write_model(folder, extra_inputs=()):
    import openvino
    import openvino.opset13 as ops

    def parameter(name):
        node = ops.parameter([-1, -1], np.int64, name=name)
        node.output(0).set_names({name})
        return node

    ids, mask = parameter("input_ids"), parameter("attention_mask")
    extras = [parameter(name) for name in extra_inputs]
    second = ops.multiply(ops.convert(ids, np.float32), ops.constant(0, np.float32))  # zeros of the ids' shape
    for extra in extras:
        second = ops.add(second, ops.convert(extra, np.float32))
    columns = [ops.unsqueeze(ops.convert(ids, np.float32), ops.constant([-1], np.int64)),
               ops.unsqueeze(second, ops.constant([-1], np.int64))]
    hidden = ops.concat(columns, -1)
    hidden.output(0).set_names({"last_hidden_state"})
    openvino.save_model(openvino.Model([hidden], [ids, mask, *extras], "tiny"), folder / "openvino_model.xml")
    return folder


QUERY_TOKENS = 32


def embedder(folder, pooling="mean", normalize=False, max_length=64, tokenizer=None, fast_tokenizer=None,
             padding=True, query_tokens=QUERY_TOKENS):
    return Embedder(folder, "CPU", pooling, normalize, max_length, {"INFERENCE_PRECISION_HINT": "f32"},
                    tokenizer or CharTokenizer(), fast_tokenizer, padding, query_tokens)


def test_mean_pooling_averages_a_text_s_own_tokens_and_never_its_padding(tmp_path):
    vectors = embedder(write_model(tmp_path)).embed(["a", "abc"])
    assert vectors.dtype == np.float32
    assert np.allclose(vectors, [[(START + ord("a") + END) / 3, 0.0],
                                 [(START + ord("a") + ord("b") + ord("c") + END) / 5, 0.0]])


def test_normalized_vectors_have_unit_length(tmp_path):
    vectors = embedder(write_model(tmp_path, ["position_ids"]), normalize=True).embed(["ab", "a longer text"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)


@pytest.mark.parametrize(("pooling", "row"), [("cls", lambda ids: ids[0]), ("last_token", lambda ids: ids[-1])])
def test_cls_takes_the_first_token_and_last_token_a_text_s_own_last(tmp_path, pooling, row):
    vectors = embedder(write_model(tmp_path, ["position_ids"]), pooling=pooling).embed(["a", "abcd"])
    short, long = [START, ord("a"), END], [START, *map(ord, "abcd"), END]
    assert vectors[:, 0].tolist() == [row(short), row(long)]  # whole numbers: exact in f32
    assert vectors[:, 1].tolist() == [short.index(row(short)), long.index(row(long))]  # the position picked


def test_an_unknown_pooling_is_refused_at_load(tmp_path):
    with pytest.raises(ValueError, match="Unknown pooling 'max'"):
        embedder(write_model(tmp_path), pooling="max")


def test_token_types_are_zeros_and_positions_count_from_zero(tmp_path):
    vectors = embedder(write_model(tmp_path, ["token_type_ids", "position_ids"])).embed(["abc"])
    assert vectors[0, 1] == pytest.approx(sum(range(5)) / 5)  # positions 0-4, types 0


def loaded(folder, tokenizer, **options):
    """An embedder whose tokenizer's calls are recorded from here on (not its probe of the tokenizer's cut)."""
    model = embedder(folder, tokenizer=tokenizer, **options)
    tokenizer.calls.clear()
    return model


def test_one_encoding_gives_the_count_and_the_vectors(tmp_path):
    tokenizer = CharTokenizer()
    model = loaded(write_model(tmp_path), tokenizer)
    counts, vectors = model.embed_counted(["a", "abc"], [8, None])
    assert counts == [3, 5] and tokenizer.calls == [(["a", "abc"], None)]
    assert vectors.tolist() == embedder(write_model(tmp_path)).embed(["a", "abc"]).tolist()


def test_a_text_over_its_limit_is_counted_and_not_embedded(tmp_path):
    model = embedder(write_model(tmp_path))
    counts, vectors = model.embed_counted(["a", "abcdefgh", "ab"], [8, 8, None])
    assert counts == [3, 10, 4]
    assert np.array_equal(vectors, [model.embed(["a"])[0], [0.0, 0.0], model.embed(["ab"])[0]])
    assert model.embed_counted(["abcdefgh"], [8]) == ([10], None)  # nothing embedded at all


def test_a_text_over_the_model_s_length_is_cut_from_its_one_encoding_keeping_its_end_token(tmp_path):
    tokenizer = CharTokenizer()
    model = loaded(write_model(tmp_path), tokenizer, max_length=4)
    assert model.end_tokens == 1
    counts, vectors = model.embed_counted(["abcdef", "a"])
    assert counts == [8, 3] and tokenizer.calls == [(["abcdef", "a"], None)]  # counted whole, encoded once
    assert np.allclose(vectors, [[(START + ord("a") + ord("b") + END) / 4, 0.0], [(START + ord("a") + END) / 3, 0]])


def test_where_the_tokenizer_cuts_otherwise_a_text_over_the_length_is_encoded_again_by_it(tmp_path):
    tokenizer = KeepsTheEnd()
    model = loaded(write_model(tmp_path), tokenizer, max_length=4)
    assert model.end_tokens is None
    counts, vectors = model.embed_counted(["a", "abcdef"])
    assert counts == [3, 8] and tokenizer.calls == [(["a", "abcdef"], None), (["abcdef"], 4)]
    assert np.allclose(vectors, [[(START + ord("a") + END) / 3, 0], [(START + ord("e") + ord("f") + END) / 4, 0.0]])


def test_each_text_is_cut_to_its_own_request_s_cut_within_the_model_s_length(tmp_path):
    tokenizer = CharTokenizer()
    model = loaded(write_model(tmp_path, ["position_ids"]), tokenizer, max_length=6)
    texts = ["abcdef", "abcdef", "abcdefgh", "a"]  # 8, 8, 10 and 3 tokens
    counts, vectors = model.embed_counted(texts, None, None, [3, None, 5, 3])  # "a" within its cut
    assert counts == [8, 8, 10, 3] and len(tokenizer.calls) == 1  # counted whole, encoded once
    assert np.array_equal(vectors, model.embed(["a", "abcd", "abc", "a"]))  # first tokens and the end token


def test_where_the_tokenizer_cuts_otherwise_each_cut_is_encoded_again_at_its_length(tmp_path):
    tokenizer = KeepsTheEnd()
    model = loaded(write_model(tmp_path), tokenizer, max_length=6)
    counts, vectors = model.embed_counted(["abcdef", "abcd", "xyzxyz"], None, None, [3, 4, 3])
    assert counts == [8, 6, 8]
    assert tokenizer.calls == [(["abcdef", "abcd", "xyzxyz"], None), (["abcdef", "xyzxyz"], 3), (["abcd"], 4)]
    assert np.allclose(vectors, model.embed(["f", "cd", "z"]))


def test_the_tokenizer_s_end_tokens_are_read_from_a_probe_cut_both_ways():
    class NoSpecialTokens(CharTokenizer):
        def encode(self, texts, max_length=None, truncation=False, padding_side=None):
            encoded = super().encode(texts, max_length and max_length + 2, truncation, padding_side)
            return SimpleNamespace(input_ids=SimpleNamespace(data=encoded.input_ids.data[:, 1:-1]),
                                   attention_mask=SimpleNamespace(data=encoded.attention_mask.data[:, 1:-1]))

    assert (end_tokens(CharTokenizer(), 16), end_tokens(KeepsTheEnd(), 16)) == (1, None)
    assert end_tokens(NoSpecialTokens(), 16) == 0


@pytest.mark.parametrize(("lengths", "limit", "expected"), [
    ([3, 3, 2], 6, [slice(0, 2), slice(2, 3)]), ([9, 1, 1], 6, [slice(0, 1), slice(1, 3)]),
    ([1, 9], 6, [slice(0, 1), slice(1, 2)]), ([2, 2], 6, [slice(0, 2)]), ([], 6, [])])
def test_runs_of_tokens_within_a_limit_in_order_a_longer_text_alone(lengths, limit, expected):
    assert runs(lengths, limit) == expected


def test_a_call_of_more_tokens_than_a_batch_runs_in_several_inferences_with_the_same_vectors(tmp_path):
    model = embedder(write_model(tmp_path, ["position_ids"]), padding=False, query_tokens=0)
    texts = ["abcdef", "ab", "abcd", "a"]  # 8, 4, 6 and 3 tokens
    whole = model.embed(texts)
    assert model.shape == (4, 8)
    counts, vectors = model.embed_counted(texts, [None] * 4, batch_tokens=12)
    assert counts == [8, 4, 6, 3] and np.array_equal(vectors, whole)
    assert model.shape == (2, 6)  # the last inference: "abcd" and "a", at the longer one's length


@pytest.mark.parametrize(("length", "limit", "width"), [(3, 64, 8), (8, 64, 8), (9, 64, 16), (30, 32, 32),
                                                        (33, 36, 36), (36, 36, 36)])
def test_a_first_call_is_padded_to_a_multiple_of_8_within_the_model_s_length(tmp_path, length, limit, width):
    assert embedder(write_model(tmp_path), max_length=limit).width(2, length) == width


@pytest.mark.parametrize(("shape", "width"), [((1, 10), 24), ((1, 24), 24), ((1, 8), 24), ((1, 7), 8), ((1, 25), 32),
                                              ((2, 16), 24), ((2, 15), 16), ((3, 20), 24)])
def test_a_call_keeps_the_last_call_s_shape_while_that_pads_at_most_16_tokens(tmp_path, shape, width):
    model = embedder(write_model(tmp_path))
    model.shape = (shape[0], 24)
    assert model.width(*shape) == width


def test_the_call_s_shape_is_kept_and_its_padding_is_the_pad_id_and_masked(tmp_path):
    model = embedder(write_model(tmp_path))
    first = model.embed(["abcdefghijklmnopqrstu", "a"])  # 23 tokens: 24
    assert model.shape == (2, 24)
    second = ["abcdefghijklmn", "ab"]  # 16 tokens
    assert np.allclose(model.embed(second), embedder(write_model(tmp_path)).embed(second))
    assert model.shape == (2, 24) and first.shape == (2, 2)  # 16 tokens at 24, as at 16
    assert Embedder.padded(np.ones((2, 3), dtype=np.int64), 8, 7).tolist() == [[1, 1, 1] + [7] * 5] * 2


def test_a_query_runs_on_the_model_compiled_for_its_one_shape_with_the_dynamic_model_s_vectors(tmp_path):
    model = embedder(write_model(tmp_path, ["position_ids"]))
    dynamic = embedder(write_model(tmp_path, ["position_ids"]), padding=False, query_tokens=0)
    text = "q" * (QUERY_TOKENS - 2)  # its start and end tokens make QUERY_TOKENS
    for texts in (["abc"], [text]):
        assert np.array_equal(model.embed(texts), dynamic.embed(texts))
    assert model.shape == (0, 0) and model.query_request.get_input_tensor(0).shape == [1, QUERY_TOKENS]
    model.embed([text + "q"])  # one token more: the dynamic model
    assert model.shape == (1, QUERY_TOKENS + 8)


def test_the_query_shape_is_at_most_the_model_s_length_and_0_is_none(tmp_path):
    assert embedder(write_model(tmp_path), max_length=8).query_tokens == 8
    model = embedder(write_model(tmp_path), query_tokens=0)
    model.embed(["abc"])
    assert model.query_request is None and model.shape == (1, 8)


def test_without_padding_every_call_but_a_query_runs_at_its_own_length_on_the_dynamic_model(tmp_path):
    model = embedder(write_model(tmp_path), padding=False)
    assert model.width(1, 3) == 3
    model.embed(["abcdefghijklmnopqrstu", "a"])
    model.embed(["a"])  # a query: its own shape's model
    assert model.shape == (2, 23)
    model.embed(["a", "b"])
    assert model.shape == (2, 3)


def compiled_in(precision):
    properties = {"INFERENCE_PRECISION_HINT": SimpleNamespace(get_type_name=lambda: precision)}
    return SimpleNamespace(get_property=properties.__getitem__)


@pytest.mark.parametrize(("device", "precision", "amx", "free"), [
    ("CPU", "bf16", True, True), ("CPU", "f32", True, False), ("CPU", "bf16", False, False),
    ("CPU", "f32", False, False), ("GPU", "f16", False, True), ("GPU.1", "f32", False, True)])
def test_padding_is_free_where_a_short_call_reads_weights_rather_than_computes(device, precision, amx, free):
    assert padding_is_free(device, compiled_in(precision), lambda: amx) is free


@pytest.mark.parametrize(("device", "precision", "amx", "tokens"), [
    ("CPU", "bf16", True, WIDE_QUERY_TOKENS), ("GPU", "f16", False, WIDE_QUERY_TOKENS),
    ("CPU", "bf16", False, NARROW_QUERY_TOKENS), ("CPU", "f32", True, 0), ("CPU", "f32", False, 0)])
def test_the_query_shape_is_narrower_where_padding_computes_and_none_in_f32(device, precision, amx, tokens):
    assert default_query_tokens(device, compiled_in(precision), lambda: amx) == tokens
    assert 0 < NARROW_QUERY_TOKENS < WIDE_QUERY_TOKENS


def test_the_device_decides_the_shapes_when_the_caller_does_not(tmp_path):
    import openvino

    folder = write_model(tmp_path)
    compiled = openvino.Core().compile_model(str(folder / "openvino_model.xml"), "CPU",
                                             {"INFERENCE_PRECISION_HINT": "f32"})
    assert padding_is_free("CPU", compiled) is False  # what it computes in, read back: f32
    assert default_query_tokens("CPU", compiled) == 0
    model = embedder(folder, padding=None, query_tokens=None)
    assert model.padding is False and model.query_tokens == 0 and model.query_request is None


def fp16_weighted_model():
    """x [1, 4] times fp16 weights widened to f32, plus a row gathered from an fp16 table widened to f32."""
    import openvino
    import openvino.opset13 as ops

    x = ops.parameter([1, 4], np.float32, name="x")
    weights = ops.convert(ops.constant(np.arange(12, dtype=np.float16).reshape(4, 3) / 8), np.float32)
    table = ops.convert(ops.constant(np.arange(6, dtype=np.float16).reshape(2, 3)), np.float32)
    row = ops.gather(table, ops.constant([1], np.int64), ops.constant(0, np.int64))
    return openvino.Model([ops.add(ops.matmul(x, weights, False, False), row)], [x], "fp16")


def test_f32_weights_widens_a_matrix_product_s_fp16_weights_once_and_keeps_the_answer():
    import openvino

    def run(model):
        compiled = openvino.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        return compiled({"x": np.array([[1.0, -2.0, 0.5, 3.0]], np.float32)})[0]

    def constants(model):
        return sorted(op.get_output_element_type(0).get_type_name() for op in model.get_ordered_ops()
                      if op.get_type_name() == "Constant" and op.get_output_shape(0) in ([4, 3], [2, 3]))

    model = fp16_weighted_model()
    assert constants(model) == ["f16", "f16"]
    expected = run(model)
    widened = f32_weights(fp16_weighted_model())
    assert constants(widened) == ["f16", "f32"]  # the gathered table stays fp16
    assert np.array_equal(run(widened), expected)


class Value(str):
    """An rt_info value, as the runtime model gives it."""

    def astype(self, _kind):
        return str(self)


def compiled_with(precision: str, layers: list[tuple[str, str]]):
    """A compiled model computing in `precision` whose runtime model has these (layer type, runtime precision)."""
    nodes = [SimpleNamespace(get_rt_info=lambda kind=kind, runs=runs: {"layerType": Value(kind),
                                                                        "runtimePrecision": Value(runs)})
             for kind, runs in layers]
    return SimpleNamespace(
        get_property={"INFERENCE_PRECISION_HINT": SimpleNamespace(get_type_name=lambda: precision)}.__getitem__,
        get_runtime_model=lambda: SimpleNamespace(get_ordered_ops=lambda: nodes))


@pytest.mark.parametrize(("device", "precision", "layers", "widens"), [
    ("CPU", "f32", [("Gather", "f16"), ("FullyConnected", "f16"), ("FullyConnected", "f32")], True),
    ("CPU", "f32", [("Gather", "f16"), ("FullyConnected", "f32")], False),  # an fp16 table is only gathered from
    ("CPU", "bf16", [("FullyConnected", "bf16")], False),
    ("CPU", "f16", [("FullyConnected", "f16")], False),  # computing in f16: nothing is widened
    ("GPU", "f32", [("FullyConnected", "f16")], False)])
def test_the_weights_are_widened_once_where_the_cpu_plugin_widens_them_at_every_call(device, precision, layers,
                                                                                     widens):
    assert widens_weights_per_call(device, compiled_with(precision, layers)) is widens


class CharFastTokenizer:
    """The fast tokenizer's interface over CharTokenizer's tokens; `calls` records each encode's texts."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts, pad_id=0):
        self.calls.append(list(texts))
        encoded = CharTokenizer().encode(texts, padding_side="right")
        ids = np.where(encoded.attention_mask.data == 1, encoded.input_ids.data, pad_id)
        return ids, encoded.attention_mask.data


def test_short_calls_take_the_fast_tokenizer_and_long_ones_the_openvino_one(tmp_path):
    tokenizer, fast = CharTokenizer(), CharFastTokenizer()
    model = loaded(write_model(tmp_path), tokenizer, max_length=2048, fast_tokenizer=fast)
    short, long = ["a", "b" * (SHORT_CHARACTERS - 1)], ["a", "b" * SHORT_CHARACTERS]
    counts, vectors = model.embed_counted(short)
    assert fast.calls == [short] and tokenizer.calls == [] and counts == [3, SHORT_CHARACTERS + 1]
    assert np.allclose(vectors, embedder(write_model(tmp_path), max_length=2048).embed(short))
    model.embed_counted(long)
    assert fast.calls == [short] and tokenizer.calls == [(long, None)]


def test_a_short_text_over_the_model_s_length_is_cut_from_the_fast_tokenizer_s_encoding(tmp_path):
    tokenizer, fast = CharTokenizer(), CharFastTokenizer()
    model = loaded(write_model(tmp_path), tokenizer, max_length=4, fast_tokenizer=fast)
    assert model.embed_counted(["abcdef"])[0] == [8]
    assert np.allclose(model.embed(["abcdef"]), [[(START + ord("a") + ord("b") + END) / 4, 0.0]])
    assert fast.calls == [["abcdef"]] * 2 and tokenizer.calls == []
