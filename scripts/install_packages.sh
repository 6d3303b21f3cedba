#!/usr/bin/env bash
# `pip install ARGS...` into the virtual environment VENV, showing its progress, by uv where uv can be had: uv
# installed what `make run` needs into a fresh venv in 56 s against pip's 95 s (measured on a 2-core Xeon, empty
# caches; 17 s against 83 s with warm caches). uv comes from PyPI, pinned by constraints.txt, into .cache/uv once.
# pip installs instead where uv cannot be installed, where pip is pointed at an index of its own (a mirror:
# uv reads none of pip's configuration), or with INSTALLER=pip.
#   scripts/install_packages.sh [--with-excluded | --excluded FILE] VENV -c constraints.txt -e ".[backend]"
# Either way the packages of scripts/excluded-packages.txt stay out of VENV (hard requirements of chromadb and
# langsmith that no code path of the stack imports; the file says why), or those of FILE, or none with
# --with-excluded (the test tools use one).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
excluded="${root}/scripts/excluded-packages.txt"
if [[ "${1:-}" == --with-excluded ]]; then excluded=/dev/null; shift; fi
if [[ "${1:-}" == --excluded ]]; then excluded="$(realpath "$2")"; shift 2; fi
venv="$1"
shift
uv="${root}/.cache/uv/bin/uv"

pip_has_own_index() {
  "${venv}/bin/pip" config list 2>/dev/null | grep -q '\.index-url='
}

if [[ "${INSTALLER:-uv}" == uv && ! -x "${uv}" ]] && ! pip_has_own_index; then
  # Its own small venv, so that uv (40 MB) is not among what the stack's venv carries.
  { "${venv}/bin/python" -m venv "${root}/.cache/uv" \
      && PYTHONWARNINGS=ignore "${root}/.cache/uv/bin/pip" install -q -c "${root}/constraints.txt" uv; } \
    || { echo "note: uv could not be installed; pip installs instead" >&2; rm -rf "${root}/.cache/uv"; }
fi

if [[ "${INSTALLER:-uv}" == uv && -x "${uv}" ]] && ! pip_has_own_index; then
  # --system-certs: the system's certificate store, as pip's truststore reads it (a corporate proxy's CA).
  # --compile-bytecode: as pip does, so that a service's first start and the first test run import compiled code
  # (a fresh clone's unit tier spent ~10 s compiling what it imported).
  exec "${uv}" pip install --python "${venv}/bin/python" --system-certs --compile-bytecode --excludes "${excluded}" "$@"
fi
PYTHONWARNINGS=ignore "${venv}/bin/pip" install --progress-bar on "$@"
mapfile -t names < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "${excluded}")
installed=()
for name in "${names[@]}"; do
  if "${venv}/bin/pip" show -q "${name}" >/dev/null 2>&1; then installed+=("${name}"); fi
done
if [[ ${#installed[@]} -gt 0 ]]; then "${venv}/bin/pip" uninstall -y -q "${installed[@]}"; fi
