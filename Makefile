# Two commands: `make demo` and `make test`. Both build .venv from pyproject.toml first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test bench bench-judges soak clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m engine.demo

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m bench.run

bench-judges: $(STAMP)
	$(BIN)/python -m bench.judges

soak: $(STAMP)
	$(BIN)/python -m pytest -m soak

clean:
	rm -rf $(VENV) demo-out .pytest_cache
