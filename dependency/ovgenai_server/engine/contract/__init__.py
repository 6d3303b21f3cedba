"""What both processes read: the engine seam's protocols, the types and messages that cross
between the API process and the engine process, a model's spec and tuning, the KV cache's
size and the weights a pipeline loads."""
