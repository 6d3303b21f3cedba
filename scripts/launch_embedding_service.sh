#!/usr/bin/env bash
# Launch the embedding microservice (port 6000), in Docker or natively.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<USAGE
Usage: $(basename "$0") [-p PORT] [-m MODEL_DIR] [--native|--docker] [-h]

  -p PORT       port to publish (default 6000)
  -m MODEL_DIR  exported embedding model (default ${ROOT}/models/sentence-transformers/all-MiniLM-L6-v2)
  --native      run from the project's .venv even if Docker is available
  --docker      run the container
  -h            this help

API_KEY, when set, is required from clients. HOST_BIND: the address to listen on, or to publish the port on
(default 127.0.0.1, this machine only).
USAGE
}

port=6000 model="${ROOT}/models/sentence-transformers/all-MiniLM-L6-v2" mode=auto
while [[ $# -gt 0 ]]; do
  case "$1" in
    -p) port="$2"; shift 2 ;;
    -m) model="$2"; shift 2 ;;
    --native) mode=native; shift ;;
    --docker) mode=docker; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
done
image="opea/embedding:latest"
run_mode="$(choose_mode "${mode}" "${image}")"
echo "launching the embedding microservice (${run_mode}) on ${BIND}:${port}"
with_api_key SERVICE_API_KEY
if [[ "${run_mode}" == docker ]]; then
  exec docker run --rm --name "${CONTAINER_NAME:-embedding-microservice}" -p "${BIND}:${port}:6000" \
    -v "$(realpath "${model}"):/model:ro" -e EMBEDDING_MODEL_PATH=/model "${KEY_ARGS[@]}" "${image}"
fi
require_venv
export HOST="${BIND}" PORT="${port}" EMBEDDING_MODEL_PATH="${model}"
exec "${PYTHON}" -m microservices.embedding
