# nmt: `make help` lists the targets. Hydra overrides pass through ARGS, e.g.
#   make train ARGS="experiment=multi30k_cpu trainer.max_epochs=3"
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch
# The index torch comes from: empty = pip's own (PyPI's Linux wheel carries CUDA); a CPU-only
# build: TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
ARGS ?=
# pytest processes for `make test`, one thread each: one more than CI's 2 cores, to use the
# cores while a test waits (servers' timeouts and idle windows); 292-325 s against 334-372 s
# with 2 in the same hours (docs/benchmarks.md). On more cores, raise it.
TEST_WORKERS ?= 3
# Training runs under jemalloc where the system has it (Debian/Ubuntu: libjemalloc2): under
# glibc's malloc a CPU run's epochs grew slower, 57 s to 84 s by its 30th (docs/benchmarks.md).
# JEMALLOC= trains under the system's allocator.
JEMALLOC ?= $(firstword $(wildcard /usr/lib/*-linux-gnu/libjemalloc.so.2 /usr/lib64/libjemalloc.so.2 /usr/lib/libjemalloc.so.2))
TRAIN_ENV := $(if $(JEMALLOC),LD_PRELOAD=$(JEMALLOC))

.DEFAULT_GOAL := help
.PHONY: help install test test-slow lint format tokenizer smoke train translate evaluate export serve sweep report bench clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

# transformers 4, beside the venv's 5 (which dropped pipeline("translation")): the HF export's
# test loads the exported directory with it too. Its hub client conflicts with `datasets`, so
# it lives in its own folder, put first on PYTHONPATH by that test alone.
TRANSFORMERS4 := $(VENV)/transformers4
$(TRANSFORMERS4)/.installed: $(VENV)/.installed
	$(PY) -m pip install --quiet --no-deps --target $(TRANSFORMERS4) "transformers>=4.57,<5" \
		"huggingface_hub>=0.34,<1" "tokenizers>=0.22,<0.23" requests urllib3 charset-normalizer
	touch $@

install: $(VENV)/.installed $(TRANSFORMERS4)/.installed ## Create .venv: torch (TORCH_SPEC, TORCH_INDEX) first, then nmt with [dev]

test: install ## The test suite CI runs (TEST_WORKERS processes; DDP, two nodes and kill -9 resume included)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(ARGS)

test-slow: install ## The slow test: the CPU recipe learning for 10 epochs (~15 min on 2 cores)
	$(PY) -m pytest -q -m slow $(ARGS)

lint: install ## ruff check and format check
	$(VENV)/bin/ruff check nmt tests bench
	$(VENV)/bin/ruff format --check nmt tests bench

format: install ## Apply ruff's fixes and formatting
	$(VENV)/bin/ruff check --fix nmt tests bench
	$(VENV)/bin/ruff format nmt tests bench

tokenizer: install ## Train (or reuse) the experiment's sentencepiece model in tokenizers/
	$(PY) -m nmt.build_tokenizer $(ARGS)

smoke: install ## Check the install: 50 updates of a small recipe, model.pt, test translated (<2 min)
	$(TRAIN_ENV) $(PY) -m nmt.train experiment=smoke $(ARGS)

train: install ## Train the experiment that suits this machine (ARGS="experiment=NAME" picks one)
	$(TRAIN_ENV) $(PY) -m nmt.train $(ARGS)

translate: install ## Translate stdin (or input=FILE): ARGS="ckpt=outputs/.../model.pt"
	$(PY) -m nmt.translate $(ARGS)

evaluate: install ## BLEU/chrF scores of a checkpoint: ARGS="ckpt=... splits=[valid]"
	$(PY) -m nmt.evaluate $(ARGS)

export: install ## A CTranslate2 model dir: ARGS="ckpt=outputs/.../model.pt out=DIR quantization=int8"
	$(PY) -m nmt.export $(ARGS)

serve: install ## Serve a model over HTTP: ARGS="ckpt=outputs/.../model.pt port=8000"
	$(PY) -m nmt.serve $(ARGS)

sweep: install ## Training sweep (Hydra multirun): ARGS="experiment=multi30k_cpu model.d_model=128,256"
	$(TRAIN_ENV) $(PY) -m nmt.train -m $(ARGS)

report: install ## Table + plots of a folder of runs: ARGS="multirun/..."
	$(PY) -m nmt.report $(ARGS)

bench: install ## Benchmarks against Hugging Face; writes bench/results.json
	$(PY) -m pip install --quiet -e ".[dev,bench]"
	$(PY) bench/run_all.py $(ARGS)

clean: ## Remove caches and run outputs (keeps .venv and tokenizers/)
	rm -rf .pytest_cache .ruff_cache outputs multirun evaluations bench/results.json
	find . -name __pycache__ -not -path "./$(VENV)/*" -prune -exec rm -rf {} +
