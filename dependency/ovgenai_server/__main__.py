"""`python -m ovgenai_server [--model PATH] [--port 8008] ...`; every flag also reads from the environment, and
OVMS's and vLLM's flags are taken as their guides type them (cli.py)."""

from __future__ import annotations

import sys

from pydantic_settings import CliApp

from ovgenai_common.logs import setup_logging

from .cli import CLIError, boolean_settings, translate
from .settings import BackendSettings


def main(argv: list[str] | None = None) -> None:
    try:
        args = translate(sys.argv[1:] if argv is None else argv, boolean_settings(BackendSettings))
    except CLIError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from error
    settings = CliApp.run(BackendSettings, cli_args=args)
    setup_logging(settings.log_level, settings.log_format)
    from .app import serve

    serve(settings)

if __name__ == "__main__":
    main()
