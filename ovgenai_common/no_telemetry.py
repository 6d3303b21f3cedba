"""No usage reports to Intel: imported by every package of this project before anything imports OpenVINO.

OpenVINO's Python package sends an event to Google Analytics when it is imported (openvino.tools.ovc, with the
openvino-telemetry package that openvino depends on), unless the user has opted out in ~/intel; NNCF does the same
when it compresses weights. These services reach nothing beyond loopback unless their user configures it (their own
telemetry goes only to an OTLP endpoint they name), so the reporting package is made unimportable in our processes:
OpenVINO and NNCF then use their own stubs, which send nothing. The user's opt-in file is left as it is.
"""

from __future__ import annotations

import sys

# A None entry makes `import openvino_telemetry` raise ImportError (the import system's documented way to block a
# module); an already imported one is left alone, as this must run first to matter.
sys.modules.setdefault("openvino_telemetry", None)  # type: ignore[arg-type]
