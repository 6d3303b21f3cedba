#!/usr/bin/env bash
# Build a microservice image: `build_docker_microservice.sh [llm|embedding|gateway]` (default llm, as OPEA's
# script builds the LLM microservice) -> opea/<name>:latest
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="${1:-llm}"
case "${name}" in
  llm|embedding|gateway) ;;
  -h|--help) echo "Usage: $(basename "$0") [llm|embedding|gateway]"; exit 0 ;;
  *) echo "error: llm, embedding or gateway, got '${name}'" >&2; exit 2 ;;
esac
exec docker build -f "${ROOT}/microservices/${name}/Dockerfile" -t "opea/${name}:latest" "${ROOT}"
