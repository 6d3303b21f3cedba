#!/usr/bin/env bash
# Build every image: the backend (CPU, and GPU with `--gpu`), the three microservices and the model preparation.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then echo "Usage: $(basename "$0") [--gpu]"; exit 0; fi
"${HERE}/build_docker_vllm_openvino.sh" cpu
if [[ "${1:-}" == "--gpu" ]]; then "${HERE}/build_docker_vllm_openvino.sh" gpu; fi
for name in llm embedding gateway models; do "${HERE}/build_docker_microservice.sh" "${name}"; done
