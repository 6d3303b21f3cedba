#!/usr/bin/env bash
# The Python of the model conversion tools (torch's CPU build, transformers, optimum-intel, NNCF), which live in
# their own environment apart from what running the stack needs. Model preparation (python -m ovgenai_models) hands
# a conversion to it when the tools are missing where it runs; the first call installs them (`make export-tools`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${root}/.cache/export-venv"
if [[ ! -f "${venv}/.installed" ]]; then
  echo "A model needs converting: installing the conversion tools into ${venv} (once) ..." >&2
  make -C "${root}" --no-print-directory export-tools >&2
fi
exec "${venv}/bin/python" "$@"
