"""The engine seen from the API process: the OpenVINO runtime (requests sent, outputs
detokenized, cut at stop strings and fanned out; the engine process supervised), the prompt
builder, the grammar checks asked before admission, the prefill backlog, core placement."""
