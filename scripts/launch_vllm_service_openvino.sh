#!/usr/bin/env bash
# Launch the OpenVINO GenAI backend (OpenAI + OVMS APIs) on CPU or an Intel GPU, in Docker or natively.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<USAGE
Usage: $(basename "$0") [-d cpu|gpu] [-p PORT] [-m MODEL] [-n NAME] [--native|--docker] [-h]

  -d DEVICE   cpu (default) or gpu; gpu sets VLLM_OPENVINO_DEVICE=GPU and uses the GPU image, given
              /dev/dri with the video group and the render node's (RENDER_GROUP_ID, default: its owner's)
  -p PORT     port to publish (default 8008)
  -m MODEL    model repository folder, IR folder, .gguf file, or a Hugging Face model id (OpenVINO IR,
              owner/name:QUANT of a GGUF repository, or a Transformers checkpoint), which is prepared on
              first use (into the ${MODELS_VOLUME:-ov-genai-models} volume in Docker, into ${ROOT}/models
              natively) and served under that id (default: \${LLM_MODEL_ID:-${ROOT}/models})
  -n NAME     served model name for a single-model folder (default: its folder name)
  --native    run from the project's .venv even if Docker is available
  --docker    run the container (fails if no Docker engine or image; REGISTRY and TAG name the image as
              the build scripts do: $(image_name backend), $(image_name backend-gpu))
  -h          this help

Environment passed through: VLLM_OPENVINO_DEVICE, VLLM_OPENVINO_KVCACHE_SPACE,
VLLM_OPENVINO_CPU_KV_CACHE_PRECISION, VLLM_OPENVINO_KV_CACHE_PRECISION,
VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS, PROMPT_LOOKUP (default true), AUTOTUNE, MAX_QUEUE_WAIT; for a Hugging
Face id: LLM_MODEL_REVISION, GGUF_FILENAME, HF_TOKEN (or HUGGINGFACEHUB_API_TOKEN) for gated models, HF_ENDPOINT.
API_KEY (or SERVICE_API_KEY), when set, is required from clients. HOST_BIND: the address to listen on, or to
publish the port on (default 127.0.0.1, this machine only). http_proxy, https_proxy, no_proxy (either case),
ALLOWED_HOSTS and ALLOWED_ORIGINS are passed to the containers.
USAGE
}

device=cpu port=8008 model="${LLM_MODEL_ID:-${ROOT}/models}" name=""
parse_options "-d:device -m:model -n:name" "$@"
case "${device}" in
  cpu) image="$(image_name backend)"; export VLLM_OPENVINO_DEVICE="${VLLM_OPENVINO_DEVICE:-CPU}" ;;
  gpu) image="$(image_name backend-gpu)"; export VLLM_OPENVINO_DEVICE="${VLLM_OPENVINO_DEVICE:-GPU}" ;;
  *) echo "error: -d takes cpu or gpu" >&2; exit 2 ;;
esac

run_mode="$(choose_mode "${mode}" "${image}")"
if [[ "${device}" == gpu && "${run_mode}" == docker ]]; then
  # The render node (/dev/dri/renderD*) belongs to the host's render group, whose id differs between hosts.
  render_group="${RENDER_GROUP_ID:-$(stat -c '%g' /dev/dri/renderD* 2>/dev/null | head -n1 || true)}"
  if [[ -z "${render_group}" ]]; then
    echo "error: no GPU render node under /dev/dri: install the Intel GPU driver (i915 or xe), or set" \
         "RENDER_GROUP_ID to the group that owns it" >&2
    exit 2
  fi
fi
echo "launching the backend (${run_mode}, device ${VLLM_OPENVINO_DEVICE}) on ${BIND}:${port}"
with_api_key SERVICE_API_KEY
export PROMPT_LOOKUP="${PROMPT_LOOKUP:-true}"  # as compose: the stack's answers quote their context
passthrough=(VLLM_OPENVINO_DEVICE VLLM_OPENVINO_KVCACHE_SPACE VLLM_OPENVINO_CPU_KV_CACHE_PRECISION
             VLLM_OPENVINO_KV_CACHE_PRECISION VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS PROMPT_LOOKUP AUTOTUNE
             MAX_QUEUE_WAIT)
volume="${MODELS_VOLUME:-ov-genai-models}"
serve_path=""  # inside the container: where the one model to serve is (a Hugging Face id, prepared)

if [[ "${run_mode}" == docker ]]; then
  if [[ -e "${model}" && "${model}" == *.gguf ]]; then
    # openvino-genai cannot open a GGUF file on a read-only mount: serve its IR conversion instead.
    prepare_in_volume -v "$(realpath "$(dirname "${model}")"):/source:ro" -- \
      --llm "/source/$(basename "${model}")" --embedding none
    mount="${volume}:/models:ro"
    name="${name:-$(served_name "${model}")}" serve_path="/models/$(served_name "${model}")"
  elif [[ -e "${model}" ]]; then
    mount="$(realpath "${model}"):/models:ro"
    if [[ -z "${name}" && -f "${model}/openvino_model.xml" ]]; then  # one model: served by its folder's name,
      name="$(basename "$(realpath "${model}")")"                    # as natively (not as the mount point)
    fi
  else
    prepare_in_volume -- --llm "${model}" --embedding none
    mount="${volume}:/models:ro"
    name="${name:-$(served_name "${model}")}" serve_path="/models/$(served_name "${model}")"
  fi
  args=(run --pull=never --rm --name "${CONTAINER_NAME:-vllm-openvino-server}" -p "${BIND}:${port}:8008" -v "${mount}"
        "${KEY_ARGS[@]}" "${ENV_ARGS[@]}")
  for var in "${passthrough[@]}"; do
    if [[ -n "${!var:-}" ]]; then args+=(-e "${var}=${!var}"); fi
  done
  if [[ "${device}" == gpu ]]; then  # the GPU's device nodes, and the groups that may open them, as OPEA's script
    args+=(--device /dev/dri --group-add video --group-add "${render_group}")
  fi
  if [[ -n "${name}" ]]; then args+=(-e "SERVED_MODEL_NAME=${name}"); fi
  if [[ -n "${serve_path}" ]]; then args+=(-e "MODEL_PATH=${serve_path}"); fi
  exec docker "${args[@]}" "${image}"
fi
require_venv
if [[ ! -e "${model}" ]]; then  # a Hugging Face id: prepared into the project's model repository once, served alone
  prepare_natively --llm "${model}" --embedding none
  name="${name:-$(served_name "${model}")}" model="${ROOT}/models/$(served_name "${model}")"
fi
extra=()
if [[ -n "${name}" ]]; then extra+=(--served_model_name "${name}"); fi
exec "${PYTHON}" -m ovgenai_server --model "${model}" --host "${BIND}" --port "${port}" "${extra[@]}"
