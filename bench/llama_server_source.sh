#!/usr/bin/env bash
# llama.cpp's `llama-server` for machines without network: its source trimmed once, with network, to what the
# server needs (the llama.cpp tree vendored in PyPI's llama-cpp-python sdist: 176 MB unpacked, a few MB of xz
# trimmed), and built from that tarball offline, for the CPU in hand (-DGGML_NATIVE=ON), with every core.
#   usage: bench/llama_server_source.sh trim OUT.tar.xz [PIP]   (network: PyPI; PIP default .venv/bin/pip)
#          bench/llama_server_source.sh build TARBALL [HOME]     (offline; prints the llama-server it built)
#          bench/llama_server_source.sh --home                    (where `build` puts this CPU's build)
# `build` reuses a finished build in HOME (default .cache/llama.cpp/<version>-<CPU extensions>/ in the checkout), so
# each kind of CPU gets one. bench/build_llama_server.sh is the networked build that `make llama-server` runs (it
# adds llama-quantize and the converter); bench/server_class.py looks for either.
set -euo pipefail
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CPU_KIND="$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|amx_bf16|amx_int8)$' | sort | tr '\n' '-')"
HOME_DIR="${LLAMA_CPP_HOME:-$ROOT/.cache/llama.cpp/$VERSION-${CPU_KIND%-}}"

trim() {
  local out="$1" pip="${2:-$ROOT/.venv/bin/pip}" tree
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
  local src="$HOME/.cache/ovgenai-bench/src"  # where bench/build_llama_server.sh keeps the sdist: reused
  if [ ! -f "$src/llama_cpp_python-$VERSION.tar.gz" ]; then
    mkdir -p "$src"
    "$pip" download --quiet --no-deps --no-binary :all: --dest "$src" "llama-cpp-python==$VERSION"
  fi
  tar -xzf "$src/llama_cpp_python-$VERSION.tar.gz" -C "$WORK" "llama_cpp_python-$VERSION/vendor/llama.cpp"
  tree="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
  # Everything the server's targets never compile: the models' vocabularies, docs, tests, Python, the GPU and NPU
  # backends (ggml adds a backend's folder only when it is switched on), the web UI's sources (it is off).
  ( cd "$tree"
    find . -mindepth 1 -maxdepth 1 ! -name CMakeLists.txt ! -name cmake ! -name common ! -name ggml ! -name include \
      ! -name src ! -name tools ! -name vendor ! -name scripts ! -name LICENSE ! -name licenses -exec rm -rf {} +
    find scripts -mindepth 1 ! -name ui-assets.cmake -delete 2>/dev/null || true
    find ggml/src -mindepth 1 -maxdepth 1 -type d ! -name ggml-cpu -exec rm -rf {} +
    find tools -mindepth 1 -maxdepth 1 ! -name CMakeLists.txt ! -name server ! -name mtmd ! -name ui -exec rm -rf {} +
    rm -rf tools/server/tests tools/server/README*.md tools/server/themes tools/server/public* \
      tools/mtmd/tests tools/mtmd/test-* tools/mtmd/legacy-models \
      tools/ui/src tools/ui/static tools/ui/tests tools/ui/package-lock.json tools/ui/README.md
    # Only the server and what it links (mtmd, the UI stub) in the tools' list.
    printf 'find_package(Threads REQUIRED)\nllama_add_compile_flags()\nadd_subdirectory(ui)\nadd_subdirectory(mtmd)\nadd_subdirectory(server)\n' \
      > tools/CMakeLists.txt )
  mkdir -p "$(dirname "$out")"
  tar -C "$WORK/llama_cpp_python-$VERSION/vendor" --transform "s,^llama.cpp,llama.cpp-$VERSION," \
    -cJf "$out" llama.cpp
  echo "$out: $(du -h "$out" | cut -f1) (llama.cpp from llama-cpp-python $VERSION, trimmed for llama-server)"
}

build() {
  local tarball="$1" home="${2:-$HOME_DIR}"
  if [ -x "$home/bin/llama-server" ]; then echo "$home/bin/llama-server"; exit 0; fi
  rm -rf "$home/src" && mkdir -p "$home/src"
  tar -xJf "$tarball" -C "$home/src" --strip-components=1
  # Offline: no curl or OpenSSL (no model downloads), no web UI to fetch or build, no unified binary; the tests,
  # examples and the rest of the tools are not in the trimmed tree.
  cmake -S "$home/src" -B "$home/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_COMMIT="llama-cpp-python-$VERSION" >&2
  cmake --build "$home/build" --target llama-server -j "$(nproc)" >&2
  mkdir -p "$home/bin"
  cp "$home/build/bin/llama-server" "$home/bin/"
  rm -rf "$home/src" "$home/build"  # only the binary is kept: it links llama.cpp statically
  echo "$home/bin/llama-server"
}

case "${1:-}" in
  trim) shift; trim "$@" ;;
  build) shift; build "$@" ;;
  --home) echo "$HOME_DIR" ;;
  *) sed -n '2,10p' "$0"; exit 2 ;;
esac
