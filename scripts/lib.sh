#!/usr/bin/env bash
# Shared by the launch scripts: run a service in Docker when an engine and the image are there, natively
# (from the project's .venv) otherwise. Sourced, not executed.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${ROOT}/.venv/bin/python"

docker_usable() {
  command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 && docker image inspect "$1" >/dev/null 2>&1
}

# choose_mode MODE IMAGE -> prints docker or native
choose_mode() {
  local mode="$1" image="$2"
  case "${mode}" in
    docker) echo docker ;;
    native) echo native ;;
    auto) if docker_usable "${image}"; then echo docker; else echo native; fi ;;
    *) echo "unknown mode ${mode}" >&2; return 2 ;;
  esac
}

require_venv() {
  if [[ ! -x "${PYTHON}" ]]; then
    echo "error: ${PYTHON} not found; run 'make setup' first" >&2
    exit 2
  fi
}
