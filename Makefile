# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_WHEEL := $(wildcard /opt/wheels/torch-2.13.0+cpu-*.whl)
# The demo uses LoCoMo only when RAGMEM_LOCOMO (or LOCOMO=...) names its folder, or ../shared/data/locomo exists;
# otherwise it generates a conversation of its own, so a fresh clone needs nothing beside it.
LOCOMO ?= $(or $(RAGMEM_LOCOMO),$(wildcard ../shared/data/locomo))

.PHONY: install demo check test bench bench-quick clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The CPU build of torch goes in first, so sentence-transformers finds it satisfied
# and no CUDA build of several GB is downloaded.
$(VENV)/.installed: $(BIN)/python pyproject.toml
	@if [ -n "$(TORCH_WHEEL)" ]; then $(BIN)/pip install -q "$(TORCH_WHEEL)"; \
	else $(BIN)/pip install -q torch==2.13.0; fi
	$(BIN)/pip install -q -e ".[all]"
	touch $@

install: $(VENV)/.installed

demo: install
	RAGMEM_LOCOMO=$(LOCOMO) HF_HUB_OFFLINE=1 $(BIN)/python examples/demo.py

# the fast lane: lint, types, and the tests that need neither the real model nor a server nor seconds of their own
# (tests/conftest.py marks them by the fixtures they take, and `slow` by its rule: property tests, processes,
# thread stress, waits). About 45 s on a quiet 2-core machine with mypy's cache warm (ruff 0.1 s, mypy 4-8 s,
# about 590 tests 36-40 s); a first run's mypy fills .mypy_cache in about 3 min
FAST := not model and not postgres and not server and not slow
check: install
	$(BIN)/ruff check ragmem benchmarks tests
	$(BIN)/mypy
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -m "$(FAST)"

# lint, then types, then every test: CI runs exactly this (.ci/run)
test: install
	$(BIN)/ruff check ragmem benchmarks tests
	$(BIN)/mypy
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest

# every table of BENCHMARKS.md from its own runs (benchmarks/run_all.py lists them; hours on 2 cores), the plots
# beside; bench-quick runs a small slice of each into benchmarks/results/*-quick.* and never touches BENCHMARKS.md
bench: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m benchmarks.run_all

bench-quick: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m benchmarks.run_all --quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
