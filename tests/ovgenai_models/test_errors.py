"""How the conversion tools are got, as every message that needs them says: natively their own environment, in the
models image (which has none) the models-export image and how each way of deploying runs it."""

from __future__ import annotations

from ovgenai_models.errors import export_tools_hint


def test_natively_the_hint_is_the_tools_own_environment(monkeypatch):
    monkeypatch.delenv("OVGENAI_EXPORT_IMAGE", raising=False)
    hint = export_tools_hint()
    assert "`make export-tools`" in hint and ".cache/export-venv" in hint and "models-export image" in hint


def test_in_the_models_image_the_hint_is_the_image_that_has_them(monkeypatch):
    monkeypatch.setenv("OVGENAI_EXPORT_IMAGE", "models-export")
    hint = export_tools_hint()
    assert "with the models-export image instead" in hint and "`-f compose.export.yaml`" in hint
    assert "models.prepare.exportTools=true" in hint and "build_docker_microservice.sh models-export" in hint
    assert "make export-tools" not in hint  # there is no checkout in the image
