"""`python -m microservices.embedding`: OpenAI and TEI embeddings on port 6000."""

from __future__ import annotations

import sys

from pydantic_settings import CliApp

from microservices.common.app import run_app, setup_logging

from .app import create_app
from .settings import EmbeddingSettings


def main(argv: list[str] | None = None) -> None:
    settings = CliApp.run(EmbeddingSettings, cli_args=sys.argv[1:] if argv is None else argv)
    setup_logging(settings.log_level)
    run_app(create_app(settings), settings)


if __name__ == "__main__":
    main()
