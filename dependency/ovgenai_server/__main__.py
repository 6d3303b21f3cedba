"""`python -m ovgenai_server [--model PATH] [--port 8008] ...`; every flag also reads from the environment, and
OVMS's and vLLM's flags are taken as their guides type them (cli.py)."""

from __future__ import annotations

import sys

from pydantic_settings import CliApp

from ovgenai_common.logs import setup_logging

from .cli import CLIError, Unrecognized, boolean_settings, known_settings, notes, translate, version
from .settings import BackendSettings


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "--version" in argv or "-V" in argv:
        print(f"ovgenai_server {version()}")
        return
    try:
        args = translate(argv, boolean_settings(BackendSettings), known_settings(BackendSettings))
    except Unrecognized as error:  # as vLLM's command line (argparse) says it
        print(f"usage: python -m ovgenai_server [-h] [--version] [options]\nerror: {error}", file=sys.stderr)
        raise SystemExit(2) from error
    except CLIError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from error
    for note in notes(argv):
        print(f"warning: {note}", file=sys.stderr)
    settings = CliApp.run(BackendSettings, cli_args=args)
    setup_logging(settings.log_level, settings.log_format)
    from .app import serve

    serve(settings)

if __name__ == "__main__":
    main()
