#!/usr/bin/env bash
# Build the backend image: `build_docker_vllm_openvino.sh [cpu|gpu]` -> localhost/ov-genai-stack/backend:latest, or
# backend-gpu (REGISTRY and TAG change the name, as in compose/.env; extra arguments go to `docker build`).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
target="${1:-cpu}"
case "${target}" in
  cpu) stage=backend ;;
  gpu) stage=backend-gpu ;;
  -h|--help) echo "Usage: $(basename "$0") [cpu|gpu] [docker build options]"; exit 0 ;;
  *) echo "error: cpu or gpu, got '${target}'" >&2; exit 2 ;;
esac
shift || true
build_args
exec docker build --target "${stage}" -t "$(image_name "${stage}")" "${BUILD_ARGS[@]}" "$@" "${ROOT}"
