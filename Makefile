# The two commands of the README: `make demo` and `make test`. Both create .venv and install
# the package the first time; after that they need no network.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install bench lint clean

# The first run installs from PyPI: pip shows what it collects and its progress bars (a
# minute or more of silence reads as a hang); later runs skip this step.
$(STAMP): pyproject.toml
	@echo "First run: creating $(VENV) and installing langchain-genmem and its dependencies (1-3 min)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e '.[test]'
	@echo "Installed into $(VENV)"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/genmem demo "data/generative_agents/July1_the_ville_isabella_maria_klaus-step-3-12/personas/Maria Lopez/bootstrap_memory/associative_memory"

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_retrieval.py

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache build dist *.egg-info
