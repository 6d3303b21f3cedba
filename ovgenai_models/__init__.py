"""Model preparation: OVMS-style model repositories (config.json + graph.pbtxt per model) and the defaults."""

import ovgenai_common.no_telemetry  # noqa: F401 - before anything imports OpenVINO
