"""A request's outputs on their way to the client: the one stream runner, SSE chunks, log probabilities,
and the request's accounting (usage, metrics, its log line)."""
