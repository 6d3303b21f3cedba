"""`python -m ovgenai_server [--model PATH] [--port 8008] ...`; every flag also reads from the environment, and
OVMS's and vLLM's flags are taken as their guides type them (cli.py)."""

from __future__ import annotations

import sys

from pydantic_settings import CliApp

from ovgenai_common.app import run_app, setup_logging

from .cli import CLIError, boolean_settings, translate
from .settings import BackendSettings


def main(argv: list[str] | None = None) -> None:
    try:
        args = translate(sys.argv[1:] if argv is None else argv, boolean_settings(BackendSettings))
    except CLIError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from error
    settings = CliApp.run(BackendSettings, cli_args=args)
    setup_logging(settings.log_level)
    from ovgenai_models.repository import ModelRepositoryError

    from .app import create_app
    from .devices import available_devices, check_device
    from .model_specs import load_model_specs

    try:
        for spec in load_model_specs(settings):
            check_device(spec.device, available_devices())
    except (ModelRepositoryError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from error
    except OSError as error:  # e.g. a mounted repository the server's user may not read
        print(f"error: cannot read the model repository ({settings.model}): {error}", file=sys.stderr)
        raise SystemExit(2) from error
    app = create_app(settings)
    run_app(app, settings)
    if app.state.fatal_error:
        print(f"error: could not load {app.state.fatal_error}", file=sys.stderr)
        raise SystemExit(3)


if __name__ == "__main__":
    main()
