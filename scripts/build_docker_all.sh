#!/usr/bin/env bash
# Build every image the stack runs: the backend (CPU, and GPU with `--gpu`), the three microservices and the model
# preparation; `--export` also the model preparation with the conversion tools (models-export, about 2 GB: only for a
# Transformers checkpoint).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
gpu="" export_tools=""
for arg in "$@"; do
  case "${arg}" in
    --gpu) gpu=1 ;;
    --export) export_tools=1 ;;
    -h|--help) echo "Usage: $(basename "$0") [--gpu] [--export]"; exit 0 ;;
    *) echo "error: --gpu or --export, got '${arg}'" >&2; exit 2 ;;
  esac
done
"${HERE}/build_docker_vllm_openvino.sh" cpu
if [[ -n "${gpu}" ]]; then "${HERE}/build_docker_vllm_openvino.sh" gpu; fi
for name in llm embedding gateway models ${export_tools:+models-export}; do "${HERE}/build_docker_microservice.sh" "${name}"; done
