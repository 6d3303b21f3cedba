#!/usr/bin/env bash
# Shared by the launch scripts: run a service in Docker when an engine and the image are there, natively
# (from the project's .venv) otherwise. Sourced, not executed.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${ROOT}/.venv/bin/python"
# Where a service listens (natively) or its port is published (Docker): this machine only, unless HOST_BIND says
# otherwise (e.g. HOST_BIND=0.0.0.0, with API_KEY set).
# shellcheck disable=SC2034  # read by the scripts that source this file
BIND="${HOST_BIND:-127.0.0.1}"

# with_api_key NAME...: API_KEY, when set, under each name the service reads (SERVICE_API_KEY, its own, and the
# keys it sends downstream); KEY_ARGS gets `-e NAME` for each one set, so that `docker run` passes the value
# without putting it on a command line.
with_api_key() {
  KEY_ARGS=()
  local name
  for name in "$@"; do
    if [[ -n "${API_KEY:-}" ]]; then export "${name}=${API_KEY}"; fi
    if [[ -n "${!name:-}" ]]; then
      export "${name?}"
      KEY_ARGS+=(-e "${name}")
    fi
  done
}

docker_usable() {
  command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 && docker image inspect "$1" >/dev/null 2>&1
}

# image_name NAME: the name scripts/build_docker_*.sh and compose give an image, REGISTRY/ov-genai-stack/NAME:TAG.
# The default registry, localhost, is one no registry serves: a name that cannot be pulled from anyone else's.
image_name() {
  echo "${REGISTRY:-localhost}/ov-genai-stack/$1:${TAG:-latest}"
}

# The images are built from this repository (scripts/build_docker_*.sh), or pushed to REGISTRY by you and pulled
# with `docker pull` first: every `docker run` here says --pull=never, so that a missing image stops with what to
# build (require_image IMAGE) instead of a registry's error or a wait.
require_image() {
  if ! docker_usable "$1"; then
    echo "error: no image $1 on the Docker engine (or no engine): build it with scripts/build_docker_all.sh" \
         "(REGISTRY and TAG name it), or docker pull it from your registry" >&2
    return 2
  fi
}

# The proxies of a corporate network, and what the services' own settings take from the environment: given to every
# container by name (ENV_ARGS: `-e NAME`, never the value on a command line, since a proxy URL may carry a password).
# With a proxy, no_proxy gains this machine's names: the services call each other on localhost.
PASSED_ON=(http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY ALLOWED_HOSTS ALLOWED_ORIGINS)
PROXIES=(http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY)
if [[ -n "${http_proxy:-}${https_proxy:-}${HTTP_PROXY:-}${HTTPS_PROXY:-}" ]]; then
  no_proxy="${no_proxy:-${NO_PROXY:-}}"
  no_proxy="${no_proxy:+${no_proxy},}localhost,127.0.0.1,::1"
  NO_PROXY="${no_proxy}"
fi
ENV_ARGS=()
for _name in "${PASSED_ON[@]}"; do
  if [[ -n "${!_name:-}" ]]; then export "${_name?}"; ENV_ARGS+=(-e "${_name}"); fi
done
unset _name

# build_args: what `docker build` is given besides the target: the proxies by name (Docker hands them to RUN steps
# and keeps them out of the image) and the values of the images' OCI labels.
build_args() {
  local name source
  source="$(git -C "${ROOT}" config --get remote.origin.url 2>/dev/null || true)"
  source="$(printf '%s' "${source}" | sed -E 's#^git@([^:]+):#https://\1/#; s#://[^/@]*@#://#; s#\.git$##')"
  BUILD_ARGS=(--build-arg "VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "${ROOT}/pyproject.toml" | head -n1)"
              --build-arg "REVISION=$(git -C "${ROOT}" rev-parse HEAD 2>/dev/null || echo unknown)"
              --build-arg "SOURCE=${source}")
  for name in "${PROXIES[@]}"; do
    if [[ -n "${!name:-}" ]]; then BUILD_ARGS+=(--build-arg "${name}"); fi
  done
}

# choose_mode MODE IMAGE -> prints docker or native
choose_mode() {
  local mode="$1" image="$2"
  case "${mode}" in
    docker) require_image "${image}" || return 2; echo docker ;;
    native) echo native ;;
    auto) if docker_usable "${image}"; then echo docker; else echo native; fi ;;
    *) echo "unknown mode ${mode}" >&2; return 2 ;;
  esac
}

require_venv() {
  if [[ ! -x "${PYTHON}" ]]; then
    echo "error: ${PYTHON} not found; run 'make install' first (what 'make run' installs: the serving packages)" >&2
    exit 2
  fi
}

# served_name REFERENCE: the name a model is served under, as ovgenai_models/sources.py says: a Hugging Face id
# as it is (owner/name, owner/name:QUANT), a local folder or .gguf file by its own name.
served_name() {
  local reference="$1"
  if [[ -e "${reference}" ]]; then
    reference="$(basename "$(realpath "${reference}")")"
    if [[ -f "$1" ]]; then reference="${reference%.gguf}"; fi
  else
    while [[ "${reference}" == /* ]]; do reference="${reference#/}"; done
    while [[ "${reference}" == */ ]]; do reference="${reference%/}"; done
  fi
  echo "${reference}"
}

# models_image: the image that prepares models: MODELS_IMAGE, else models-export where it has been built (it also
# converts a Transformers checkpoint: scripts/build_docker_microservice.sh models-export), else models (OpenVINO IR
# and GGUF, no torch).
models_image() {
  if [[ -n "${MODELS_IMAGE:-}" ]]; then
    echo "${MODELS_IMAGE}"
  elif docker image inspect "$(image_name models-export)" >/dev/null 2>&1; then
    image_name models-export
  else
    image_name models
  fi
}

# prepare_in_volume [docker run options] -- PREPARE_ARGS...: `python -m ovgenai_models prepare PREPARE_ARGS` with the
# models image (models_image), into the models volume (MODELS_VOLUME) with the Hub's cache in its own (HF_CACHE_VOLUME); the
# model choice (revisions, GGUF file), the Hub's token and address, and the proxies are passed on.
prepare_in_volume() {
  local options=() container="ov-genai-prepare-$$" status=0 name
  while [[ $# -gt 0 && "$1" != -- ]]; do options+=("$1"); shift; done
  shift
  for name in HF_TOKEN HUGGINGFACEHUB_API_TOKEN HF_ENDPOINT LLM_MODEL_REVISION GGUF_FILENAME EMBEDDING_MODEL_REVISION \
              RERANK_MODEL_REVISION; do
    if [[ -n "${!name:-}" ]]; then export "${name?}"; options+=(-e "${name}"); fi
  done
  echo "preparing $* in the ${MODELS_VOLUME:-ov-genai-models} volume"
  # Not `run --rm`: some Docker-API engines (Podman's) then lose the exit status, and a failure must stop here.
  docker run --pull=never --name "${container}" -v "${MODELS_VOLUME:-ov-genai-models}:/models" \
    -v "${HF_CACHE_VOLUME:-ov-genai-hf-cache}:/hf-cache" "${ENV_ARGS[@]}" "${options[@]}" \
    "$(models_image)" "$@" \
    || status=$?
  docker rm "${container}" >/dev/null 2>&1 || true
  if [[ "${status}" -ne 0 ]]; then echo "error: preparing $* failed (exit ${status})" >&2; fi
  return "${status}"
}

# prepare_natively PREPARE_ARGS...: the same into the project's models folder, from .venv.
prepare_natively() {
  require_venv
  "${PYTHON}" -m ovgenai_models prepare --model_repository_path "${ROOT}/models" "$@"
}

# default_model NAME: DEFAULT_LLM or DEFAULT_EMBEDDING, read from ovgenai_common/names.py, which owns them.
default_model() {
  sed -n "s/^$1 = \"\(.*\)\"\$/\1/p" "${ROOT}/ovgenai_common/names.py"
}

# parse_options "FLAG:VARIABLE ..." "$@": the options every launch script takes (-p PORT, --native, --docker, -h)
# and its own, each a flag with a value stored in the variable named (e.g. "-m:model -r:reranker"). Sets `port`
# and `mode` (auto, native or docker); -h prints the script's `usage`; an unknown option prints it and exits 2.
parse_options() {
  local spec="-p:port $1" pair found
  shift
  # shellcheck disable=SC2034  # read by the scripts that source this file
  mode=auto
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --native) mode=native; shift; continue ;;
      --docker) mode=docker; shift; continue ;;
      -h|--help) usage; exit 0 ;;
    esac
    found=""
    for pair in ${spec}; do
      if [[ "$1" == "${pair%%:*}" ]]; then
        if [[ $# -lt 2 ]]; then echo "option $1 needs a value" >&2; usage >&2; exit 2; fi
        printf -v "${pair#*:}" '%s' "$2"
        found=1
        shift 2
        break
      fi
    done
    if [[ -z "${found}" ]]; then echo "unknown option: $1" >&2; usage >&2; exit 2; fi
  done
}
