"""`--help` names each command as users type it (`python -m ovgenai_services.llm`), never `__main__.py`: every service's
settings class carries its package's name (ovgenai_common.settings.ServiceSettings), and the other command lines
name themselves. The real `--help` of each: system/test_help.py."""

from __future__ import annotations

import pytest

from ovgenai_server.settings import BackendSettings
from ovgenai_server.torchserve.settings import TorchServeSettings
from ovgenai_services.embedding.settings import EmbeddingSettings
from ovgenai_services.gateway.settings import GatewaySettings
from ovgenai_services.llm.settings import LLMSettings


@pytest.mark.parametrize(("settings", "command"), [
    (LLMSettings, "python -m ovgenai_services.llm"),
    (EmbeddingSettings, "python -m ovgenai_services.embedding"),
    (GatewaySettings, "python -m ovgenai_services.gateway"),
    (BackendSettings, "python -m ovgenai_server"),
    (TorchServeSettings, "python -m ovgenai_server.torchserve"),  # a subclass of the backend's: its own name
])
def test_each_service_s_help_names_its_command(settings, command):
    assert settings.model_config["cli_prog_name"] == command


def test_the_model_tool_and_the_stack_name_themselves():
    from ovgenai_models.cli import build_parser
    from ovgenai_services.stack.__main__ import Stack

    assert build_parser().prog == "python -m ovgenai_models"
    assert Stack.model_config["cli_prog_name"] == "python -m ovgenai_services.stack"
