#!/usr/bin/env bash
# Launch the OpenVINO GenAI backend (OpenAI + OVMS APIs) on CPU or an Intel GPU, in Docker or natively.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<USAGE
Usage: $(basename "$0") [-d cpu|gpu] [-p PORT] [-m MODEL] [-n NAME] [--native|--docker] [-h]

  -d DEVICE   cpu (default) or gpu; gpu sets VLLM_OPENVINO_DEVICE=GPU and uses the GPU image
  -p PORT     port to publish (default 8008)
  -m MODEL    model repository folder, IR folder or .gguf file (default: ${ROOT}/models)
  -n NAME     served model name for a single-model folder (default: its folder name)
  --native    run from the project's .venv even if Docker is available
  --docker    run the container (fails if no Docker engine or image)
  -h          this help

Environment passed through: VLLM_OPENVINO_DEVICE, VLLM_OPENVINO_KVCACHE_SPACE,
VLLM_OPENVINO_CPU_KV_CACHE_PRECISION, VLLM_OPENVINO_KV_CACHE_PRECISION,
VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS, SERVICE_API_KEY.
USAGE
}

device=cpu port=8008 model="${ROOT}/models" name="" mode=auto
while [[ $# -gt 0 ]]; do
  case "$1" in
    -d) device="$2"; shift 2 ;;
    -p) port="$2"; shift 2 ;;
    -m) model="$2"; shift 2 ;;
    -n) name="$2"; shift 2 ;;
    --native) mode=native; shift ;;
    --docker) mode=docker; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
done
case "${device}" in
  cpu) image="opea/vllm-openvino:latest"; export VLLM_OPENVINO_DEVICE="${VLLM_OPENVINO_DEVICE:-CPU}" ;;
  gpu) image="opea/vllm-openvino:gpu"; export VLLM_OPENVINO_DEVICE="${VLLM_OPENVINO_DEVICE:-GPU}" ;;
  *) echo "error: -d takes cpu or gpu" >&2; exit 2 ;;
esac

run_mode="$(choose_mode "${mode}" "${image}")"
echo "launching the backend (${run_mode}, device ${VLLM_OPENVINO_DEVICE}) on port ${port}"
passthrough=(VLLM_OPENVINO_DEVICE VLLM_OPENVINO_KVCACHE_SPACE VLLM_OPENVINO_CPU_KV_CACHE_PRECISION
             VLLM_OPENVINO_KV_CACHE_PRECISION VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS SERVICE_API_KEY)
if [[ "${run_mode}" == docker ]]; then
  args=(run --rm --name vllm-openvino-server -p "${port}:8008" -v "$(realpath "${model}"):/models:ro")
  for var in "${passthrough[@]}"; do
    if [[ -n "${!var:-}" ]]; then args+=(-e "${var}=${!var}"); fi
  done
  if [[ "${device}" == gpu ]]; then
    args+=(--device /dev/dri --group-add "$(stat -c '%g' /dev/dri/render* | head -n1)")
  fi
  if [[ -n "${name}" ]]; then args+=(-e "SERVED_MODEL_NAME=${name}"); fi
  exec docker "${args[@]}" "${image}"
fi
require_venv
extra=()
if [[ -n "${name}" ]]; then extra+=(--served_model_name "${name}"); fi
exec "${PYTHON}" -m ovgenai_server --model "${model}" --port "${port}" "${extra[@]}"
