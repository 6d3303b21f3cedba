#!/usr/bin/env bash
# The Python of the model conversion tools (torch's CPU build, transformers, optimum-intel, NNCF), which live in
# their own environment apart from what running the stack needs. Model preparation (python -m ovgenai_models) hands
# a conversion to it when the tools are missing where it runs; the first call installs them (`make export-tools`).
#   scripts/export_tools.sh --install     install them now (once; about 1.8 GB in .cache/export-venv), run nothing
#   scripts/export_tools.sh ARGS...       that environment's python ARGS..., installing it first if needed
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${root}/.cache/export-venv"
if [[ ! -f "${venv}/.installed" ]]; then
  [[ "${1:-}" == "--install" ]] || echo "A model needs converting: installing the conversion tools first." >&2
  make -C "${root}" --no-print-directory export-tools >&2
fi
if [[ "${1:-}" == "--install" ]]; then
  echo "The conversion tools are in ${venv}; model preparation converts there by itself." >&2
  exit 0
fi
exec "${venv}/bin/python" "$@"
