"""The default LLM prepared on disk: readable by every user, and an older private one fixed."""

from __future__ import annotations

from ovgenai_models.defaults import LLM_NAME, prepare_llm
from ovgenai_models.repository import current_umask
from tests.ovgenai_models.test_modes import mode


def test_the_default_llm_is_prepared_public_and_an_older_private_one_is_fixed(tmp_path):
    assert current_umask() == 0o022
    target = prepare_llm(tmp_path)
    config = tmp_path / "config.json"
    assert mode(config) == 0o644 and mode(target) == 0o755 and mode(target / "openvino_model.bin") == 0o644
    config.chmod(0o600)
    target.chmod(0o700)
    assert prepare_llm(tmp_path) == tmp_path / LLM_NAME  # already prepared: left in place, modes mended
    assert mode(config) == 0o644 and mode(target) == 0o755
