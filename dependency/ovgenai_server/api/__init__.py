"""The public APIs the backend serves, each a thin sequence of the request path's parts: OpenAI's chat
completions, completions and Responses, Anthropic's Messages, vLLM's tokenizer routes, the models' status;
and their request models (api/protocol.py, api/anthropic_protocol.py)."""
