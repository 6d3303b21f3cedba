"""OPEA's LLM microservice: a thin, truthful OpenAI pass-through in front of the backend (or any OpenAI server)."""
