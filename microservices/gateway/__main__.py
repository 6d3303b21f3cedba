"""`python -m microservices.gateway`: the ChatQnA gateway and chat page on port 8888."""

from __future__ import annotations

import sys

from pydantic_settings import CliApp

from microservices.common.app import run_app, setup_logging

from .app import create_app
from .settings import GatewaySettings


def main(argv: list[str] | None = None) -> None:
    settings = CliApp.run(GatewaySettings, cli_args=sys.argv[1:] if argv is None else argv)
    setup_logging(settings.log_level)
    run_app(create_app(settings), settings)


if __name__ == "__main__":
    main()
