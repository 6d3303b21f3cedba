"""`python -m ovgenai_services.stack up`: the whole stack, natively (launcher.py)."""

from __future__ import annotations

import sys

from pydantic_settings import BaseSettings, CliApp, CliSubCommand, get_subcommand

from .launcher import up
from .services import StackSettings


class Up(StackSettings):
    """Start the whole stack natively."""

    def cli_cmd(self) -> None:
        raise SystemExit(up(self))


class Stack(BaseSettings, cli_prog_name="python -m ovgenai_services.stack"):
    up: CliSubCommand[Up]

    def cli_cmd(self) -> None:
        get_subcommand(self).cli_cmd()


def main() -> None:
    CliApp.run(Stack, cli_args=sys.argv[1:])


if __name__ == "__main__":
    main()
