#!/usr/bin/env bash
# OPEA's guide runs this from dependency/: `cd dependency && bash launch_vllm_service_openvino.sh ...`.
# The one implementation is scripts/launch_vllm_service_openvino.sh, with the same arguments.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/../scripts/launch_vllm_service_openvino.sh" "$@"
