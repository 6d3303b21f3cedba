#!/usr/bin/env bash
# Build a microservice image: `build_docker_microservice.sh [llm|embedding|gateway|models|models-export]` (default
# llm, as OPEA's script builds the LLM microservice) -> localhost/ov-genai-stack/<name>:latest (REGISTRY and TAG
# change the name; extra arguments go to `docker build`). `models` is the one-shot model preparation (OpenVINO IR,
# GGUF; no torch), `models-export` the same with the conversion tools, for a Transformers checkpoint (about 2 GB;
# torch from PyTorch's CPU index, or from wheels in docker/wheels with --build-arg TORCH_INDEX=).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
name="${1:-llm}"
case "${name}" in
  llm|embedding|gateway|models|models-export) ;;
  -h|--help) echo "Usage: $(basename "$0") [llm|embedding|gateway|models|models-export] [docker build options]"; exit 0 ;;
  *) echo "error: llm, embedding, gateway, models or models-export, got '${name}'" >&2; exit 2 ;;
esac
shift || true
build_args
exec docker build --target "${name}" -t "$(image_name "${name}")" "${BUILD_ARGS[@]}" "$@" "${ROOT}"
