# Quick start: `make demo` runs the main job, `make test` runs the tests.
# Both create .venv and install what they need on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(STAMP)

demo: $(STAMP)
	$(BIN)/llmcap simulate --model meta-llama/Llama-2-7b-hf --sku a100-80gb \
		--scheduler sarathi --chunk-size 512 --batch-size 128 \
		--workload chat --qps 3 --num-requests 1000 --seed 0

test: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/simulate_speed.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
