#!/usr/bin/env bash
# Launch the OPEA LLM microservice (port 9000) in front of the backend, in Docker or natively.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<USAGE
Usage: $(basename "$0") [-p PORT] [-e ENDPOINT] [-m MODEL] [--native|--docker] [-h]

  -p PORT      port to publish (default 9000)
  -e ENDPOINT  backend base URL (default \${vLLM_ENDPOINT:-\${LLM_ENDPOINT:-http://localhost:8008}})
  -m MODEL     default model name (default \${LLM_MODEL}, else the served name of \${LLM_MODEL_ID}, else
               $(default_model DEFAULT_LLM))
  --native     run from the project's .venv even if Docker is available
  --docker     run the container
  -h           this help

API_KEY, when set, is required from clients and sent to the backend (SERVICE_API_KEY and OPENAI_API_KEY set
them apart). HOST_BIND: the address to listen on (default 127.0.0.1, this machine only). The proxies (http_proxy,
https_proxy, no_proxy, either case), ALLOWED_HOSTS and ALLOWED_ORIGINS are passed to the container.
USAGE
}

port=9000 endpoint="${vLLM_ENDPOINT:-${LLM_ENDPOINT:-http://localhost:8008}}"
model="${LLM_MODEL:-$(served_name "${LLM_MODEL_ID:-$(default_model DEFAULT_LLM)}")}"
parse_options "-e:endpoint -m:model" "$@"
image="$(image_name llm)"
run_mode="$(choose_mode "${mode}" "${image}")"
echo "launching the LLM microservice (${run_mode}) on ${BIND}:${port}, backend ${endpoint}"
with_api_key SERVICE_API_KEY OPENAI_API_KEY
if [[ "${run_mode}" == docker ]]; then
  # The host's network (to reach a backend on localhost): HOST keeps the service on BIND there too.
  exec docker run --pull=never --rm --name "${CONTAINER_NAME:-llm-microservice}" --network host -e "HOST=${BIND}" \
    -e "PORT=${port}" -e "LLM_ENDPOINT=${endpoint}" -e "LLM_MODEL=${model}" "${KEY_ARGS[@]}" "${ENV_ARGS[@]}" \
    "${image}"
fi
require_venv
export HOST="${BIND}" PORT="${port}" LLM_ENDPOINT="${endpoint}" LLM_MODEL="${model}"
exec "${PYTHON}" -m ovgenai_services.llm
