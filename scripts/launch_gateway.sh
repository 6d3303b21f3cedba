#!/usr/bin/env bash
# Launch the ChatQnA RAG gateway and chat page (port 8888), in Docker or natively.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<USAGE
Usage: $(basename "$0") [-p PORT] [-l LLM_URL] [-e EMBEDDING_URL] [-d DATA_DIR] [--native|--docker] [-h]

  -p PORT           port to publish (default 8888)
  -l LLM_URL        LLM microservice (default \${LLM_SERVER_ENDPOINT:-http://localhost:9000})
  -e EMBEDDING_URL  embedding service (default \${EMBEDDING_SERVER_ENDPOINT:-http://localhost:6000})
  -d DATA_DIR       where the embedded vector store persists (default ${ROOT}/data/gateway)
  --native          run from the project's .venv even if Docker is available
  --docker          run the container
  -h                this help

LLM_MODEL_ID and EMBEDDING_MODEL_ID name the models it asks for (their served names); RERANK_MODEL_ID set turns
the rerank stage on, at the embedding service (or RERANK_SERVER_ENDPOINT). API_KEY, when set, is required from
clients (the chat page asks for it) and sent to the LLM, embedding and rerank services. HOST_BIND: the address to
listen on (default 127.0.0.1, this machine only). The proxies (http_proxy, https_proxy, no_proxy, either case),
ALLOWED_HOSTS and ALLOWED_ORIGINS (web apps on other origins that call it: docs/security.md) go to the container.
USAGE
}

port=8888 llm="${LLM_SERVER_ENDPOINT:-http://localhost:9000}"
embedding="${EMBEDDING_SERVER_ENDPOINT:-http://localhost:6000}" data="${ROOT}/data/gateway"
parse_options "-l:llm -e:embedding -d:data" "$@"
image="$(image_name gateway)"
run_mode="$(choose_mode "${mode}" "${image}")"
echo "launching the gateway (${run_mode}) on ${BIND}:${port}"
with_api_key SERVICE_API_KEY LLM_API_KEY EMBEDDING_API_KEY RERANK_API_KEY
models=()  # the models it asks for, by their served names, as the other scripts serve them
for name in LLM_MODEL_ID EMBEDDING_MODEL_ID; do
  if [[ -n "${!name:-}" ]]; then export "${name}=$(served_name "${!name}")"; models+=(-e "${name}"); fi
done
for name in RERANK_MODEL_ID RERANK_SERVER_ENDPOINT; do
  if [[ -n "${!name:-}" ]]; then export "${name?}"; models+=(-e "${name}"); fi
done
if [[ "${run_mode}" == docker ]]; then
  mkdir -p "${data}"
  # The host's network (to reach the services on localhost): HOST keeps the gateway on BIND there too.
  exec docker run --pull=never --rm --name chatqna-gateway --network host -e "HOST=${BIND}" -e "PORT=${port}" \
    -e "LLM_SERVER_ENDPOINT=${llm}" -e "EMBEDDING_SERVER_ENDPOINT=${embedding}" "${KEY_ARGS[@]}" "${ENV_ARGS[@]}" "${models[@]}" \
    -v "$(realpath "${data}"):/data" -e DATA_DIR=/data "${image}"
fi
require_venv
export HOST="${BIND}" PORT="${port}" LLM_SERVER_ENDPOINT="${llm}" EMBEDDING_SERVER_ENDPOINT="${embedding}" DATA_DIR="${data}"
exec "${PYTHON}" -m ovgenai_services.gateway
