#!/usr/bin/env bash
# Build the backend image: `build_docker_vllm_openvino.sh [cpu|gpu]` -> opea/vllm-openvino:latest or :gpu
# (REGISTRY, TAG and GPU_TAG change the name, as in compose/.env; extra arguments go to `docker build`).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${1:-cpu}"
case "${target}" in
  cpu) stage=backend; tag="${TAG:-latest}" ;;
  gpu) stage=backend-gpu; tag="${GPU_TAG:-gpu}" ;;
  -h|--help) echo "Usage: $(basename "$0") [cpu|gpu] [docker build options]"; exit 0 ;;
  *) echo "error: cpu or gpu, got '${target}'" >&2; exit 2 ;;
esac
shift || true
exec docker build --target "${stage}" -t "${REGISTRY:-opea}/vllm-openvino:${tag}" "$@" "${ROOT}"
