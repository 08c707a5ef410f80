# The two set-up commands of the README:
#   make report   create .venv, install reportgen + torch, profile on this machine, build site/
#   make test     create .venv, install reportgen + torch + test tools, lint (ruff, mypy), run the test suite
#                 (tests/test_install.py also builds a wheel and runs it from a fresh venv outside the checkout)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch 2.13.0: the CPU wheel on a CPU machine's local index, the CUDA build from PyPI elsewhere.
# On Trainium, point VENV at the Neuron venv that already has torch + torch-neuronx (nothing is reinstalled).
TORCH_SPEC ?= torch==2.13.0
export TORCHINDUCTOR_CACHE_DIR ?= $(CURDIR)/.cache/inductor

.PHONY: setup report test clean-venv

$(BIN)/.reportgen-installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[profile,test]"
	touch $@

setup: $(BIN)/.reportgen-installed

report: setup
	$(BIN)/reportgen profile
	$(BIN)/reportgen build

test: setup
	$(BIN)/ruff check reportgen scenarios tests benchmarks
	$(BIN)/mypy --strict reportgen
	$(BIN)/python -m pytest

clean-venv:
	rm -rf $(VENV)
