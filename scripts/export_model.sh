#!/usr/bin/env bash
# Thin wrapper over the model preparation tool, with OVMS's export_model.py interface:
#   export_model.sh text_generation --source_model <id|folder|file.gguf> --weight-format int4 ...
#   export_model.sh embeddings --source_model <id|folder>;  export_model.sh defaults
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "${ROOT}/.venv/bin/python" -m ovgenai_models "$@"
