"""PLUGIN_CONFIG as compose and users set it."""

from __future__ import annotations

import pydantic
import pytest

from ovgenai_server.settings import BackendSettings


def test_plugin_config_from_the_environment(monkeypatch):
    monkeypatch.setenv("PLUGIN_CONFIG", "")  # compose's ${VAR:-} when the user set nothing
    assert BackendSettings().plugin_config == {}
    monkeypatch.setenv("PLUGIN_CONFIG", '{"NUM_STREAMS": 1}')
    assert BackendSettings().plugin_config == {"NUM_STREAMS": 1}
    monkeypatch.setenv("PLUGIN_CONFIG", "{bad")
    with pytest.raises(pydantic.ValidationError, match="plugin_config"):
        BackendSettings()
