"""The compose files as Compose reads them: `${VAR:-default}` interpolated from a set of variables (the .env example's,
or none), for the tests that check what compose would run."""

from __future__ import annotations

import re

from tests.support.servers import ROOT

COMPOSE = ROOT / "compose" / "compose.yaml"
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def interpolate(value, variables: dict[str, str]):
    if isinstance(value, str):
        return VARIABLE.sub(lambda m: variables.get(m.group(1)) or (m.group(2) or ""), value)
    if isinstance(value, list):
        return [interpolate(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, variables) for k, v in value.items()}
    return value


def env_example() -> dict[str, str]:
    lines = (ROOT / "compose/.env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
