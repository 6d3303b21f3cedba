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
USAGE
}

port=8888 llm="${LLM_SERVER_ENDPOINT:-http://localhost:9000}"
embedding="${EMBEDDING_SERVER_ENDPOINT:-http://localhost:6000}" data="${ROOT}/data/gateway" mode=auto
while [[ $# -gt 0 ]]; do
  case "$1" in
    -p) port="$2"; shift 2 ;;
    -l) llm="$2"; shift 2 ;;
    -e) embedding="$2"; shift 2 ;;
    -d) data="$2"; shift 2 ;;
    --native) mode=native; shift ;;
    --docker) mode=docker; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
done
image="opea/gateway:latest"
run_mode="$(choose_mode "${mode}" "${image}")"
echo "launching the gateway (${run_mode}) on port ${port}"
if [[ "${run_mode}" == docker ]]; then
  mkdir -p "${data}"
  exec docker run --rm --name chatqna-gateway --network host -e "PORT=${port}" -e "LLM_SERVER_ENDPOINT=${llm}" \
    -e "EMBEDDING_SERVER_ENDPOINT=${embedding}" -v "$(realpath "${data}"):/data" -e DATA_DIR=/data "${image}"
fi
require_venv
export PORT="${port}" LLM_SERVER_ENDPOINT="${llm}" EMBEDDING_SERVER_ENDPOINT="${embedding}" DATA_DIR="${data}"
exec "${PYTHON}" -m microservices.gateway
