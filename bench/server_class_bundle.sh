#!/usr/bin/env bash
# What bench/server_class.py needs besides this checkout on a machine without network (a big CPU machine lent for a
# few minutes), made once here, with network, into one folder that travels beside the tree (the tree is ~4 MB; the
# folder, ~45 MB, must keep the two under 64 MiB):
#   llama.cpp-<version>-server.tar.xz   llama.cpp's source trimmed to llama-server (bench/llama_server_source.sh)
#   tokenizer.gguf                       the default model's tokenizer keys and chat template (no weights)
#   site-py<X.Y>.tar.xz                  the backend's runtime packages and gguf, installed for that machine's Python
#                                        (default 3.12) and trimmed: no GPU/NPU plugins, no model frontends but
#                                        OpenVINO IR's and GGUF's, no caches or tests
#   run.sh                               the command to run there, from the checkout's root
#   usage: bench/server_class_bundle.sh [OUT]     (default .cache/server-class-bundle; BUNDLE_PYTHON=3.12)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/.cache/server-class-bundle}")"
PY="${BUNDLE_PYTHON:-3.12}"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
BIN="$ROOT/.venv/bin"
mkdir -p "$OUT"
cd "$ROOT"

SOURCE=".cache/llama.cpp/llama.cpp-$VERSION-server.tar.xz"
[ -f "$SOURCE" ] || bench/llama_server_source.sh trim "$SOURCE" "$BIN/pip"
cp "$SOURCE" "$OUT/"

SITE="$(mktemp -d)"
trap 'rm -rf "$SITE"' EXIT
# The runtime packages the backend declares (the shared core and the backend extra), at the versions every install
# of the project uses (constraints.txt), and gguf for the benchmark's writer; binary wheels for the target's Python.
"$BIN/python" - > "$SITE/requirements.txt" <<'EOF'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join([*project["dependencies"], *project["optional-dependencies"]["backend"], "gguf==0.19.0"]))
EOF
"$BIN/pip" install --quiet --no-warn-conflicts --target "$SITE/site" --python-version "$PY" --implementation cp --only-binary=:all: \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform linux_x86_64 -c constraints.txt -r "$SITE/requirements.txt"
(
  cd "$SITE/site"
  # What this benchmark never loads: OpenVINO's GPU and NPU plugins, the frontends of other model formats (the IR
  # and GGUF readers stay), its plugin cache file, the Python tools (ovc, benchmark_app), tests, byte code.
  rm -f openvino/libs/libopenvino_intel_gpu_plugin.so openvino/libs/libopenvino_intel_npu_plugin.so \
    openvino/libs/libopenvino_onnx_frontend.so* openvino/libs/libopenvino_tensorflow_frontend.so* \
    openvino/libs/libopenvino_tensorflow_lite_frontend.so* openvino/libs/libopenvino_paddle_frontend.so* \
    openvino/libs/libopenvino_pytorch_frontend.so* openvino/libs/libopenvino_jax_frontend.so* \
    openvino/libs/cache.json
  rm -rf openvino/tools bin
  # Nor the backend's parts a text model served over HTTP never imports (each imported where it is used): the
  # TorchServe front's gRPC, images (Pillow), the hub's Xet downloads, the hub's command line (rich, pygments).
  rm -rf grpc grpcio-* PIL pillow.libs pillow-* hf_xet hf_xet-* rich rich-* pygments pygments-*
  find . -name __pycache__ -prune -exec rm -rf {} + -o -name tests -type d -prune -exec rm -rf {} +
  # Debug symbols where a wheel kept them (uvloop's extension: 16 MB with them, 1 MB without); only there, since
  # stripping a library that auditwheel patched can break it.
  find . -name '*.so*' -type f -exec file {} + | grep 'with debug_info' | cut -d: -f1 | xargs -r strip --strip-debug
)
tar -C "$SITE" -cJf "$OUT/site-py$PY.tar.xz" site

"$BIN/python" bench/random_gguf.py --tokenizer-only "$OUT/tokenizer.gguf"

BUNDLE_REL="$(realpath --relative-to="$ROOT" "$OUT")"
cat > "$OUT/run.sh" <<EOF
#!/usr/bin/env bash
# bench/server_class.py on a machine without network, from the checkout's root: bash $BUNDLE_REL/run.sh [ARGS...]
# Needs Python $PY (\$PYTHON, default python$PY; the site tree brings every package, numpy too), gcc/g++, cmake and
# ninja (llama-server is built from the trimmed source, about a minute on 16 cores, once). The JSON goes to
# bench/results/, and to \$OUT when it is set.
set -euo pipefail
BUNDLE="\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
SITE="\${SERVER_CLASS_SITE:-/tmp/server-class-site-py$PY}"
[ -d "\$SITE/site" ] || { mkdir -p "\$SITE" && tar -C "\$SITE" -xJf "\$BUNDLE/site-py$PY.tar.xz"; }
export PYTHONPATH="\$SITE/site:\$PWD:\$PWD/dependency\${PYTHONPATH:+:\$PYTHONPATH}"
export HF_HUB_OFFLINE=1
JSON="bench/results/server-class-\$(date +%F).json"
"\${PYTHON:-python$PY}" bench/server_class.py --tokenizer-from "\$BUNDLE/tokenizer.gguf" \\
  --llama-source "\$BUNDLE/llama.cpp-$VERSION-server.tar.xz" --json "\$JSON" "\$@"
if [ -n "\${OUT:-}" ]; then cp "\$JSON" "\$OUT/"; fi
EOF
chmod +x "$OUT/run.sh"
echo "$OUT: $(du -sh "$OUT" | cut -f1) (the tree: $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) bytes)"
ls -la "$OUT"
