#!/usr/bin/env bash
# Shared by the launch scripts: run a service in Docker when an engine and the image are there, natively
# (from the project's .venv) otherwise. Sourced, not executed.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${ROOT}/.venv/bin/python"
# Where a service listens (natively) or its port is published (Docker): this machine only, unless HOST_BIND says
# otherwise (e.g. HOST_BIND=0.0.0.0, with API_KEY set).
# shellcheck disable=SC2034  # read by the scripts that source this file
BIND="${HOST_BIND:-127.0.0.1}"

# with_api_key NAME...: API_KEY, when set, under each name the service reads (SERVICE_API_KEY, its own, and the
# keys it sends downstream); KEY_ARGS gets `-e NAME` for each one set, so that `docker run` passes the value
# without putting it on a command line.
with_api_key() {
  KEY_ARGS=()
  local name
  for name in "$@"; do
    if [[ -n "${API_KEY:-}" ]]; then export "${name}=${API_KEY}"; fi
    if [[ -n "${!name:-}" ]]; then
      export "${name?}"
      KEY_ARGS+=(-e "${name}")
    fi
  done
}

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
