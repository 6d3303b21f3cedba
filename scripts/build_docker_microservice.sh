#!/usr/bin/env bash
# Build a microservice image: `build_docker_microservice.sh [llm|embedding|gateway|models]` (default llm, as
# OPEA's script builds the LLM microservice) -> localhost/ov-genai-stack/<name>:latest (REGISTRY and TAG change the
# name; extra arguments go to `docker build`). `models` is the one-shot model-preparation image.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
name="${1:-llm}"
case "${name}" in
  llm|embedding|gateway|models) ;;
  -h|--help) echo "Usage: $(basename "$0") [llm|embedding|gateway|models] [docker build options]"; exit 0 ;;
  *) echo "error: llm, embedding, gateway or models, got '${name}'" >&2; exit 2 ;;
esac
shift || true
build_args
exec docker build --target "${name}" -t "$(image_name "${name}")" "${BUILD_ARGS[@]}" "$@" "${ROOT}"
