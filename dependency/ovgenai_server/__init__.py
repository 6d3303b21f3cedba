"""OpenVINO GenAI continuous-batching server with OpenAI- and OVMS-compatible HTTP APIs."""

import ovgenai_common.no_telemetry  # noqa: F401 - before anything imports OpenVINO
