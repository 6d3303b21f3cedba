"""The stack's microservices: llm, embedding, gateway, and the native stack that runs them."""

import ovgenai_common.no_telemetry  # noqa: F401 - before anything imports OpenVINO
