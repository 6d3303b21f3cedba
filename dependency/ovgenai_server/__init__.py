"""OpenVINO GenAI continuous-batching server with OpenAI- and OVMS-compatible HTTP APIs."""
