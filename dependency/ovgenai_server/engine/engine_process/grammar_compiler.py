"""A grammar compiled by the same compiler, and into the same compile cache, as the engine's pipeline runs it with.

openvino_genai compiles a request's grammar (xgrammar) inside `ContinuousBatchingPipeline.step()`, the first time the
request is sampled: a grammar it refuses throws out of the step (and leaves the pipeline unusable), and a slow one
stalls every request in the batch for as long as it compiles. There is no public "compile this grammar" call, so the
checker is an `LLMPipeline` around a model that computes nothing (its logits are constants of the served model's
vocabulary size) and the serving pipeline's own tokenizer: generating with a request's structured-output
configuration makes openvino_genai build the grammar exactly as the engine would, raise what the engine would raise,
and leave the compiled grammar in the compile cache that openvino_genai keeps on that tokenizer, where the serving
pipeline's step finds it (engine/engine_process/grammar_worker.py runs this off the step).

A grammar can also compile and match no text at all (a JSON schema whose `$ref` refers only to itself, an EBNF rule
with no base case): the engine then masks every token and samples garbage. The null model's logits rank token 0 last,
so its greedy choice is token 0 only when the grammar allows no other token; two such choices are such a grammar.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ovgenai_common.errors import library_reason

from ..contract.types import StructuredOutput

logger = logging.getLogger(__name__)

NO_TOKEN_LOGIT = -1e4


def _null_model(vocabulary: int) -> Any:
    """An LLM-shaped OpenVINO model whose next-token logits are all zero: the pipeline runs it, nothing is computed."""
    import numpy as np
    import openvino
    from openvino import opset13 as ops

    inputs = {
        "input_ids": ops.parameter([-1, -1], openvino.Type.i64),
        "attention_mask": ops.parameter([-1, -1], openvino.Type.i64),
        "position_ids": ops.parameter([-1, -1], openvino.Type.i64),
        "beam_idx": ops.parameter([-1], openvino.Type.i32),
    }
    for name, parameter in inputs.items():
        parameter.output(0).set_names({name})
    shape = ops.concat([ops.shape_of(inputs["input_ids"]), ops.constant(np.array([vocabulary], np.int64))], 0)
    row = np.zeros(vocabulary, np.float32)
    row[0] = NO_TOKEN_LOGIT  # last of all tokens: chosen only when the grammar masks every token
    logits = ops.broadcast(ops.constant(row), shape)
    logits.output(0).set_names({"logits"})
    return openvino.Model([ops.result(logits)], list(inputs.values()), "grammar_checker")


def structured_output_config(structured: StructuredOutput) -> Any:
    import openvino_genai

    return openvino_genai.StructuredOutputConfig(**{structured.kind: structured.value})


class GrammarCompiler:
    """Compiles grammars on the calling thread (the call releases the GIL); one at a time."""

    def __init__(self, tokenizer: Any, vocabulary: int):
        import numpy
        import openvino
        import openvino_genai

        folder = Path(tempfile.mkdtemp(prefix="ovgenai-grammar-"))
        try:
            openvino.save_model(_null_model(vocabulary), str(folder / "openvino_model.xml"))
            self._pipeline = openvino_genai.LLMPipeline(str(folder), tokenizer, "CPU", ATTENTION_BACKEND="SDPA")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self._prompt = openvino.Tensor(numpy.zeros((1, 1), dtype=numpy.int64))

    def compile(self, structured: StructuredOutput | None) -> str | None:
        """The compiler's refusal, or None. Without a grammar, a request through the pipeline all the same: it makes
        openvino_genai set up its compile cache for this vocabulary (engine/engine_process/grammar_worker.py's
        eviction)."""
        import openvino_genai

        config = openvino_genai.GenerationConfig()
        config.max_new_tokens = 2
        try:
            if structured is not None:
                config.structured_output_config = structured_output_config(structured)
            config.validate()
            result = self._pipeline.generate(self._prompt, config)
        except Exception as error:
            return library_reason(error)
        if structured is not None and list(result.tokens[0]) == [0, 0]:
            return ("No text satisfies it (for example, a $ref that refers only to itself, or a rule with no "
                    "base case).")
        return None
