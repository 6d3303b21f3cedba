"""Texts to vectors, tokenizing each text once: the model's own tokenizer, and the model compiled with the pooling
and normalization its export declares applied inside it, as openvino-genai's TextEmbeddingPipeline applies them.

One encoding gives a call's counts (its usage and the length limit) and the model's input, where the pipeline tokenizes
inside each call (a count first was a second tokenization). A text over the model's length, or over the length its
request asked for (vLLM's truncate_prompt_tokens), is cut from that encoding as the tokenizer cuts it (its first
tokens, then the special tokens it ends with), and a call whose texts hold more tokens than a batch runs in several
inferences. Short calls are tokenized by fast_tokenizer.py.

Input shapes: a dynamic-shape model takes ~0.9 ms more for a call of another shape than the call before, and more at
any shape than a model compiled for that one shape. So a query (one text of at most `query_tokens` tokens, a
setting) runs on a second compilation of the model for exactly [1, query_tokens], for one more copy of the weights in
memory. Where a short call's time is reading the weights, whatever its length (bf16 on a CPU with AMX; a GPU, whose
kernels are built per shape), padding costs nothing: there the query shape is wide, and other calls keep the last
call's width where that pads a few tokens, or are padded (masked) to a multiple of SHAPE_MULTIPLE. Where each padded
token computes (bf16 without AMX), the query shape is narrower and other calls run at their own length (padding
them slowed passages). In f32 a query's padding costs more than a new shape, so there is no query shape
(bench/results.md). Padding changes a vector only by rounding (bf16: at most ~5e-4 in one coordinate).

Weights: computing in f32, OpenVINO's CPU plugin keeps an fp16 export's weights in fp16 and widens them at every
call (in bf16 it converts them once). Where its compiled model says so, the model is compiled again with the weights
widened once (`f32_weights`): the same vectors, faster, for more memory (bench/results.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ovgenai_common.cpu import compiled_precision, cpu_has_amx

from .fast_tokenizer import SHORT_CHARACTERS, FastTokenizer

logger = logging.getLogger(__name__)

POOLINGS = ("mean", "cls", "last_token")
SHAPE_MULTIPLE = 8  # 16 is as fast for a short query; 32 and more cost the padding's own compute
STICKY_PADDING = 16  # padded tokens, in all, a call may take to keep the shape of the call before
# The query shape's length by default: most queries fit in 32 tokens, and where padding is free 32 costs little more
# than 16; where it computes (bf16 without AMX), 24 was the fastest of 16, 24 and 32.
WIDE_QUERY_TOKENS, NARROW_QUERY_TOKENS = 32, 24


def padding_is_free(device: str, compiled: Any, has_amx: Callable[[], bool] = cpu_has_amx) -> bool:
    """Whether padding a call costs nothing for a model `compiled` on `device` (the module's docstring): on a GPU,
    and on a CPU computing in bf16 with AMX."""
    if not device.upper().startswith("CPU"):
        return True
    return has_amx() and compiled_precision(compiled) == "bf16"


def default_query_tokens(device: str, compiled: Any, has_amx: Callable[[], bool] = cpu_has_amx) -> int:
    """The query shape's length for a model `compiled` on `device` where the setting leaves it: wide where padding
    is free, narrower on a CPU computing in bf16 without AMX, none in f32."""
    if padding_is_free(device, compiled, has_amx):
        return WIDE_QUERY_TOKENS
    return NARROW_QUERY_TOKENS if compiled_precision(compiled) == "bf16" else 0


def matrix_product_precisions(compiled: Any) -> set[str]:
    """The precisions the CPU plugin runs the matrix products of `compiled` at, as its runtime model reports them."""
    layers = (node.get_rt_info() for node in compiled.get_runtime_model().get_ordered_ops())
    return {info["runtimePrecision"].astype(str) for info in layers
            if "layerType" in info and info["layerType"].astype(str) == "FullyConnected"}


def widens_weights_per_call(device: str, compiled: Any) -> bool:
    """Whether the CPU plugin runs a matrix product of `compiled` on fp16 weights while it computes in another
    precision (so widening them at every call)."""
    if not device.upper().startswith("CPU"):
        return False
    return compiled_precision(compiled) != "f16" and "f16" in matrix_product_precisions(compiled)


def f32_weights(model: Any) -> Any:
    """`model` with the fp16 weights of its matrix products (an fp16 export's, widened to f32 on every call) replaced
    by their f32 values: exact. Other constants (the token embeddings, which a call only gathers rows of; int8 weights
    and their scales) are left as they are."""
    import openvino
    import openvino.opset13 as ops

    for node in model.get_ordered_ops():
        if node.get_type_name() != "Convert" or node.get_output_element_type(0) != openvino.Type.f32:
            continue
        source = node.input_value(0).get_node()
        if source.get_type_name() != "Constant" or source.get_output_element_type(0) != openvino.Type.f16:
            continue
        if all(target.get_node().get_type_name() == "MatMul" for target in node.output(0).get_target_inputs()):
            node.output(0).replace(ops.constant(source.get_data().astype(np.float32)).output(0))
    return model


def pooled_model(model: Any, pooling: str, normalize: bool) -> Any:
    """`model` (its first output the last hidden state, [batch, tokens, hidden]) changed to give one vector a
    text there."""
    import openvino.opset13 as ops

    if pooling not in POOLINGS:
        raise ValueError(f"Unknown pooling '{pooling}' (known: {', '.join(POOLINGS)}).")
    result = model.get_results()[0]
    hidden, mask = result.input_value(0), model.input("attention_mask").get_node().output(0)
    axis = ops.constant([1], np.int64)
    if pooling == "cls":
        vector = ops.gather(hidden, ops.constant(0, np.int64), axis)
    elif pooling == "last_token":  # right padding: a text's last token is at its count - 1
        last = ops.subtract(ops.reduce_sum(mask, axis), ops.constant([1], mask.get_element_type()))
        vector = ops.gather(hidden, last, ops.constant(1, np.int64), batch_dims=1)
    else:
        weights = ops.convert(ops.unsqueeze(mask, ops.constant([-1], np.int64)), hidden.get_element_type())
        count = ops.maximum(ops.reduce_sum(weights, axis), ops.constant([1e-12], np.float32))
        vector = ops.divide(ops.reduce_sum(ops.multiply(hidden, weights), axis), count)
    if normalize:
        vector = ops.normalize_l2(vector, ops.constant([1], np.int32), 1e-12, "max")
    result.input(0).replace_source_output(vector.output(0))
    model.validate_nodes_and_infer_types()
    return model


def token_counts(mask: np.ndarray) -> list[int]:
    """Each text's tokens, from the attention mask of an encoding of several."""
    return [int(n) for n in mask.sum(axis=1)]


def arrays(encoded: Any) -> tuple[np.ndarray, np.ndarray]:
    """(token ids, attention mask) of an openvino_genai tokenizer's encoding."""
    return encoded.input_ids.data, encoded.attention_mask.data


def runs(lengths: list[int], limit: int) -> list[slice]:
    """`lengths` in order, cut into runs that add up to at most `limit` each (a longer one alone)."""
    cuts, total = [], limit + 1
    for index, length in enumerate(lengths):
        if total + length > limit:
            cuts.append(index)
            total = 0
        total += length
    return [slice(start, end) for start, end in zip(cuts, [*cuts[1:], len(lengths)], strict=False)]


def end_tokens(tokenizer: Any, max_length: int) -> int | None:
    """How many special tokens the tokenizer ends a text with, where a text's whole encoding cut to `max_length` by
    keeping them is the tokenizer's own cut (a probe of distinct numbers, longer than that, cut both ways); None
    where no count gives it."""
    probe = [" ".join(map(str, range(max_length + 1)))]
    whole = arrays(tokenizer.encode(probe, padding_side="right"))[0][0].tolist()
    cut = arrays(tokenizer.encode(probe, max_length=max_length, truncation=True, padding_side="right"))[0][0].tolist()
    for end in range(3):  # none, or a few: [SEP], </s>, an EOS
        if len(whole) > max_length and [*whole[:max_length - end], *whole[len(whole) - end:]] == cut:
            return end
    return None


class Embedder:
    """One compiled model and one infer request (and the query shape's): called from one thread at a time (the model
    process's model lane). `tokenizer`: an openvino_genai.Tokenizer of the model's folder, this embedder's own;
    `fast_tokenizer`: the one for short calls, if any; `padding`: whether other calls are padded to few shapes,
    `query_tokens` the query shape's length (0: none), each decided by the device where None."""

    def __init__(self, folder: Path, device: str, pooling: str, normalize: bool, max_length: int,
                 properties: dict[str, Any], tokenizer: Any, fast_tokenizer: FastTokenizer | None = None,
                 padding: bool | None = None, query_tokens: int | None = None):
        import openvino

        core = openvino.Core()
        model = pooled_model(core.read_model(str(Path(folder) / "openvino_model.xml")), pooling, normalize)
        self.inputs = {name for port in model.inputs for name in port.get_names()}
        compiled = core.compile_model(model, device, properties)
        if widens_weights_per_call(device, compiled):
            compiled = core.compile_model(f32_weights(model), device, properties)
        self.request = compiled.create_infer_request()
        self.padding = padding_is_free(device, compiled) if padding is None else padding
        if query_tokens is None:
            query_tokens = default_query_tokens(device, compiled)
        self.query_tokens, self.query_request = min(query_tokens, max_length), None
        if self.query_tokens:
            query_model = model.clone()
            query_model.reshape({port: [1, self.query_tokens] for port in query_model.inputs})
            self.query_request = core.compile_model(query_model, device, properties).create_infer_request()
        self.tokenizer, self.fast_tokenizer, self.max_length = tokenizer, fast_tokenizer, max_length
        self.pad_id = max(tokenizer.get_pad_token_id(), 0)  # -1 when the tokenizer has none: any id does, masked
        self.end_tokens = end_tokens(tokenizer, max_length)
        if self.end_tokens is None:
            logger.info("embedding: a text over %d tokens is encoded again to cut it (the tokenizer's cut is not its "
                        "first tokens and its end tokens)", max_length)
        self.shape = (0, 0)  # the last call's input shape on the dynamic model

    def embed(self, texts: list[str]) -> np.ndarray:
        """One float32 row per text; a text longer than the model's limit is cut to it."""
        vectors = self.embed_counted(texts)[1]
        assert vectors is not None  # no limits: every text is embedded
        return vectors

    def embed_counted(self, texts: list[str], limits: Sequence[int | None] | None = None,
                      batch_tokens: int | None = None,
                      cuts: Sequence[int | None] | None = None) -> tuple[list[int], np.ndarray | None]:
        """Each text's tokens (before any cut) and one float32 row per text, from one encoding. `limits`: one a text
        (None: none); a text over its limit is not embedded, its row zeros (no rows at all when no text is).
        `batch_tokens`: the tokens, as cut, one inference takes at most: more run in several, in order. `cuts`: the
        tokens each text is cut to (None: the model's length)."""
        ids, mask = self.encode(texts)
        counts = token_counts(mask)
        kept = [i for i, (n, limit) in enumerate(zip(counts, limits or [None] * len(texts), strict=True))
                if limit is None or n <= limit]
        if not kept:
            return counts, None
        if len(kept) < len(texts):
            ids, mask = ids[kept], mask[kept]
        ids, mask = self.cut(ids, mask, [texts[i] for i in kept], None if cuts is None else [cuts[i] for i in kept])
        lengths = token_counts(mask)
        parts = [self.run(ids[run, :max(lengths[run])], mask[run, :max(lengths[run])])
                 for run in runs(lengths, batch_tokens or sum(lengths))]
        vectors = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if len(kept) == len(texts):
            return counts, vectors
        rows = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        rows[kept] = vectors
        return counts, rows

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The texts' whole tokens: by the fast tokenizer if there is one and the call is short, else by the
        OpenVINO one."""
        if self.fast_tokenizer is not None and sum(map(len, texts)) <= SHORT_CHARACTERS:
            return self.fast_tokenizer.encode(texts, self.pad_id)
        return arrays(self.tokenizer.encode(texts, padding_side="right"))

    def cut(self, ids: np.ndarray, mask: np.ndarray, texts: list[str],
            cuts: Sequence[int | None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The encoded texts cut to the model's length (or each to its own `cuts`, within it) as the tokenizer cuts
        them: their first tokens and the special tokens they end with (`end_tokens`), or, for a tokenizer whose cut
        is not that, encoded again by it."""
        lengths = mask.sum(axis=1)
        room = np.array([min(c or self.max_length, self.max_length) for c in cuts or [None] * len(texts)])
        over = np.flatnonzero(lengths > room)
        if not len(over):
            return ids, mask
        width = int(np.minimum(lengths, room).max())
        whole, ids, mask = ids, ids[:, :width].copy(), mask[:, :width].copy()
        if self.end_tokens is None:
            for length in sorted(set(room[over].tolist())):  # one encoding per length asked for
                rows = over[room[over] == length]
                cut_ids, cut_mask = self.encode_cut([texts[i] for i in rows], length)
                ids[rows] = self.padded(cut_ids, width, self.pad_id)
                mask[rows] = self.padded(cut_mask, width, 0)
            return ids, mask
        end = self.end_tokens
        for i in over:
            n = room[i]
            ids[i, n - end:n] = whole[i, lengths[i] - end:lengths[i]]
            ids[i, n:], mask[i, :n], mask[i, n:] = self.pad_id, 1, 0
        return ids, mask

    def encode_cut(self, texts: list[str], length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        return arrays(self.tokenizer.encode(texts, max_length=length or self.max_length, truncation=True,
                                            padding_side="right"))

    def run(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        texts, length = ids.shape
        if texts == 1 and length <= self.query_tokens and self.query_request is not None:
            request, width = self.query_request, self.query_tokens
        else:
            request, width = self.request, self.width(texts, length)
            self.shape = (texts, width)
        ids, mask = self.padded(ids, width, self.pad_id), self.padded(mask, width, 0)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        if "position_ids" in self.inputs:
            feed["position_ids"] = np.broadcast_to(np.arange(ids.shape[1], dtype=np.int64), ids.shape).copy()
        request.infer(feed)
        return np.array(request.get_output_tensor(0).data, dtype=np.float32)  # a copy: the request reuses it

    def width(self, texts: int, length: int) -> int:
        """The tokens a call of `texts` texts of `length` tokens is padded to: with padding, the last call's
        width while that costs at most STICKY_PADDING padded tokens, else the next multiple of SHAPE_MULTIPLE,
        within the model's limit; else its own length."""
        if not self.padding:
            return length
        last_texts, last_width = self.shape
        if texts == last_texts and length <= last_width and (last_width - length) * texts <= STICKY_PADDING:
            return last_width
        return max(length, min(-(-length // SHAPE_MULTIPLE) * SHAPE_MULTIPLE, self.max_length))

    @staticmethod
    def padded(tokens: np.ndarray, width: int, value: int) -> np.ndarray:
        if width == tokens.shape[1]:
            return tokens
        padded = np.full((tokens.shape[0], width), value, dtype=tokens.dtype)  # np.pad takes ~10x as long
        padded[:, :tokens.shape[1]] = tokens
        return padded
