#!/usr/bin/env bash
# OPEA's guide runs this from dependency/: `cd dependency && bash build_docker_vllm_openvino.sh ...`.
# The one implementation is scripts/build_docker_vllm_openvino.sh, with the same arguments.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/../scripts/build_docker_vllm_openvino.sh" "$@"
