"""Device selection: a device that is not present is refused with the list of those that are."""

from __future__ import annotations

import pytest

from ovgenai_server.models.devices import check_device, requested_devices


def test_requested_devices():
    assert requested_devices("GPU.1") == ["GPU.1"]
    assert requested_devices("AUTO:GPU,CPU") == ["GPU", "CPU"]
    assert requested_devices("AUTO") == []


@pytest.mark.parametrize("device", ["CPU", "GPU", "GPU.1", "AUTO", "AUTO:GPU.0,CPU", "HETERO:GPU,CPU"])
def test_present_devices_pass(device):
    check_device(device, ["CPU", "GPU.0", "GPU.1"])


@pytest.mark.parametrize("device", ["GPU", "GPU.1", "NPU", "AUTO:GPU,CPU"])
def test_absent_device_lists_available(device):
    with pytest.raises(ValueError, match="available devices: CPU"):
        check_device(device, ["CPU"])
