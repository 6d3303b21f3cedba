#!/usr/bin/env bash
# Build the backend image: `build_docker_vllm_openvino.sh [cpu|gpu]` -> opea/vllm-openvino:latest or :gpu
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${1:-cpu}"
case "${target}" in
  cpu) exec docker build -f "${ROOT}/dependency/Dockerfile" -t opea/vllm-openvino:latest "${ROOT}" ;;
  gpu) exec docker build -f "${ROOT}/dependency/Dockerfile.gpu" -t opea/vllm-openvino:gpu "${ROOT}" ;;
  -h|--help) echo "Usage: $(basename "$0") [cpu|gpu]"; exit 0 ;;
  *) echo "error: cpu or gpu, got '${target}'" >&2; exit 2 ;;
esac
