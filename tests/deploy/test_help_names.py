"""`--help` names each command as users type it (`python -m microservices.llm`), never `__main__.py`: every service's
settings class carries its package's name (ovgenai_common.settings.ServiceSettings), and the other command lines
name themselves. The real `--help` of each: system/test_help.py."""

from __future__ import annotations

import pytest

from microservices.embedding.settings import EmbeddingSettings
from microservices.gateway.settings import GatewaySettings
from microservices.llm.settings import LLMSettings
from ovgenai_server.settings import BackendSettings
from ovgenai_server.torchserve.settings import TorchServeSettings


@pytest.mark.parametrize(("settings", "command"), [
    (LLMSettings, "python -m microservices.llm"),
    (EmbeddingSettings, "python -m microservices.embedding"),
    (GatewaySettings, "python -m microservices.gateway"),
    (BackendSettings, "python -m ovgenai_server"),
    (TorchServeSettings, "python -m ovgenai_server.torchserve"),  # a subclass of the backend's: its own name
])
def test_each_service_s_help_names_its_command(settings, command):
    assert settings.model_config["cli_prog_name"] == command


def test_the_model_tool_and_the_stack_name_themselves():
    from microservices.stack.__main__ import Stack
    from ovgenai_models.cli import build_parser

    assert build_parser().prog == "python -m ovgenai_models"
    assert Stack.model_config["cli_prog_name"] == "python -m microservices.stack"
