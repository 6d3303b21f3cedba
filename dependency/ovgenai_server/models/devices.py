"""Device selection: refuse, at start-up, a device this machine does not have, and list the ones it has."""

from __future__ import annotations

import re

VIRTUAL = ("AUTO", "MULTI", "HETERO", "BATCH")


def requested_devices(device: str) -> list[str]:
    """The physical devices a device string names: 'GPU.1' -> ['GPU.1'], 'AUTO:GPU,CPU' -> ['GPU', 'CPU']."""
    name, _, rest = device.partition(":")
    if name in VIRTUAL:
        return [d for d in re.split(r"[,\s]+", rest) if d]
    return [device]


def check_device(device: str, available: list[str]) -> None:
    for wanted in requested_devices(device):
        family = wanted.split(".")[0]
        present = wanted in available or (wanted == family and any(a.split(".")[0] == family for a in available))
        if not present:
            raise ValueError(
                f"Device '{wanted}' is not available on this machine; available devices: "
                f"{', '.join(available) or 'none'}."
            )


def available_devices() -> list[str]:
    import openvino

    return list(openvino.Core().available_devices)
