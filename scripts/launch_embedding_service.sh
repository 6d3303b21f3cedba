#!/usr/bin/env bash
# Launch the embedding microservice (port 6000), in Docker or natively.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<USAGE
Usage: $(basename "$0") [-p PORT] [-m MODEL] [-r RERANKER] [--native|--docker] [-h]

  -p PORT       port to publish (default 6000)
  -m MODEL      exported embedding model (an OpenVINO IR folder), or a Hugging Face id, prepared on first use (into ${ROOT}/models natively, the ${MODELS_VOLUME:-ov-genai-models}
                volume in Docker); default \${EMBEDDING_MODEL_ID:-${ROOT}/models/$(default_model DEFAULT_EMBEDDING)}
  -r RERANKER   a cross-encoder, likewise, served by /v1/rerank and /rerank (default \${RERANK_MODEL_ID:-none})
  --native      run from the project's .venv even if Docker is available
  --docker      run the container
  -h            this help

EMBEDDING_MODEL_REVISION, RERANK_MODEL_REVISION, HF_TOKEN (or HUGGINGFACEHUB_API_TOKEN) and HF_ENDPOINT apply to
Hugging Face ids. API_KEY, when set, is required from clients. HOST_BIND: the address to listen on, or to publish
the port on (default 127.0.0.1, this machine only). The proxies (http_proxy, https_proxy, no_proxy, either case),
ALLOWED_HOSTS and ALLOWED_ORIGINS are passed to the containers.
USAGE
}

port=6000 model="${EMBEDDING_MODEL_ID:-${ROOT}/models/$(default_model DEFAULT_EMBEDDING)}"
reranker="${RERANK_MODEL_ID:-}"
parse_options "-m:model -r:reranker" "$@"
image="$(image_name embedding)"
run_mode="$(choose_mode "${mode}" "${image}")"
echo "launching the embedding microservice (${run_mode}) on ${BIND}:${port}"
with_api_key SERVICE_API_KEY

# A folder is served as it is; a Hugging Face id is prepared into the model repository first (once).
to_prepare=()
if [[ ! -e "${model}" ]]; then to_prepare+=(--embedding "${model}"); else to_prepare+=(--embedding none); fi
if [[ -n "${reranker}" && ! -e "${reranker}" ]]; then to_prepare+=(--rerank "${reranker}"); fi

if [[ "${run_mode}" == docker ]]; then
  args=(run --pull=never --rm --name "${CONTAINER_NAME:-embedding-microservice}" -p "${BIND}:${port}:6000"
        "${KEY_ARGS[@]}" "${ENV_ARGS[@]}")
  if [[ "${to_prepare[*]}" != "--embedding none" ]]; then
    prepare_in_volume -- --llm none "${to_prepare[@]}"
    args+=(-v "${MODELS_VOLUME:-ov-genai-models}:/models:ro")
  fi
  if [[ -e "${model}" ]]; then
    args+=(-v "$(realpath "${model}"):/model:ro" -e EMBEDDING_MODEL_PATH=/model)
  else
    args+=(-e "EMBEDDING_MODEL_PATH=/models/$(served_name "${model}")")
  fi
  if [[ -n "${reranker}" && -e "${reranker}" ]]; then
    args+=(-v "$(realpath "${reranker}"):/reranker:ro" -e RERANK_MODEL_PATH=/reranker)
  elif [[ -n "${reranker}" ]]; then
    args+=(-e "RERANK_MODEL_PATH=/models/$(served_name "${reranker}")")
  fi
  exec docker "${args[@]}" "${image}"
fi
require_venv
if [[ "${to_prepare[*]}" != "--embedding none" ]]; then prepare_natively --llm none "${to_prepare[@]}"; fi
if [[ ! -e "${model}" ]]; then model="${ROOT}/models/$(served_name "${model}")"; fi
if [[ -n "${reranker}" && ! -e "${reranker}" ]]; then reranker="${ROOT}/models/$(served_name "${reranker}")"; fi
export HOST="${BIND}" PORT="${port}" EMBEDDING_MODEL_PATH="${model}"
if [[ -n "${reranker}" ]]; then export RERANK_MODEL_PATH="${reranker}"; fi
exec "${PYTHON}" -m ovgenai_services.embedding
