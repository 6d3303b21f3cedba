#!/usr/bin/env bash
# llama.cpp's `llama-server` and `llama-quantize`, built from the llama.cpp tree that PyPI's llama-cpp-python sdist
# vendors (the peer most CPU users run, and Ollama's engine), for `make bench-peers`. Built once into $LLAMA_CPP_HOME,
# outside the repository (about 20 minutes on 2 busy cores). Built for the CPU in hand (-march=native, as llama.cpp
# builds by default: its best configuration here), so each kind of CPU (AVX2, AVX-512, AMX) gets a build of its own.
#   usage: bench/build_llama_server.sh [PIP]    (PIP: the pip that downloads the sdist; default: .venv/bin/pip)
#          bench/build_llama_server.sh --home   (prints where this CPU's build is, built or not; the bench reads it)
set -euo pipefail
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CPU_KIND="$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|amx_bf16|amx_int8)$' | sort | tr '\n' '-')"
HOME_DIR="${LLAMA_CPP_HOME:-$HOME/.cache/ovgenai-bench/llama.cpp-$VERSION-${CPU_KIND%-}}"
SRC_DIR="$HOME/.cache/ovgenai-bench/src"
if [ "${1:-}" = "--home" ]; then echo "$HOME_DIR"; exit 0; fi
PIP="${1:-.venv/bin/pip}"
if [ -x "$HOME_DIR/bin/llama-server" ] && [ -x "$HOME_DIR/bin/llama-quantize" ] && [ -d "$HOME_DIR/convert/deps" ]; then
  echo "llama.cpp (llama-cpp-python $VERSION) already built in $HOME_DIR"; exit 0
fi
mkdir -p "$SRC_DIR"
if [ ! -d "$SRC_DIR/llama_cpp_python-$VERSION" ]; then
  "$PIP" download --quiet --no-deps --no-binary :all: --dest "$SRC_DIR" "llama-cpp-python==$VERSION"
  tar -xzf "$SRC_DIR/llama_cpp_python-$VERSION.tar.gz" -C "$SRC_DIR"
fi
TREE="$SRC_DIR/llama_cpp_python-$VERSION/vendor/llama.cpp"
cmake -S "$TREE" -B "$HOME_DIR/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF
cmake --build "$HOME_DIR/build" --target llama-server llama-quantize -j "$(nproc)"
mkdir -p "$HOME_DIR/bin"
cp -a "$HOME_DIR/build/bin/." "$HOME_DIR/bin/"
# The converter from a Transformers checkpoint to GGUF, with the gguf package it imports.
rm -rf "$HOME_DIR/convert" && mkdir -p "$HOME_DIR/convert"
cp "$TREE/convert_hf_to_gguf.py" "$HOME_DIR/convert/"
cp -r "$TREE/gguf-py" "$TREE/conversion" "$HOME_DIR/convert/"
# What the converter imports beyond the project's venv (torch, transformers, numpy), kept beside it.
"$PIP" install --quiet --target "$HOME_DIR/convert/deps" sentencepiece
"$HOME_DIR/bin/llama-server" --version
