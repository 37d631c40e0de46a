# Two commands: `make demo` and `make test`. Both build .venv from pyproject.toml first.
# `make test` starts with `make lint` (mypy on engine/, ruff's lint and format check), so CI does too.
# `make test` runs the PostgreSQL half of the tests when PostgreSQL's binaries are installed
# (apt-get install -y postgresql) or LETHE_TEST_PG=postgresql://... names a server.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# the oldest Python the package runs on (pyproject.toml: requires-python)
NEED   := 3.11
comma  := ,
# "3.11 True": the version of $(PYTHON), and whether it is new enough
VERSION = import sys; print("%d.%d" % sys.version_info[:2], sys.version_info >= ($(subst .,$(comma),$(NEED)),))
FOUND  := $(shell $(PYTHON) -c '$(VERSION)' 2>/dev/null)
HAVE   := $(word 1,$(FOUND))
# one stamp per Python version: a .venv made by another Python is rebuilt, not trusted
STAMP  := $(VENV)/.installed-$(HAVE)

# The Python is checked before anything else, in one line: an old one would churn in pip
# for minutes and then fail.
ifneq ($(MAKECMDGOALS),clean)
ifeq ($(HAVE),)
$(error $(PYTHON) not found: Lethe needs Python $(NEED) or newer (make PYTHON=python3.11 ...))
endif
ifneq ($(word 2,$(FOUND)),True)
$(error Lethe needs Python $(NEED) or newer, $(PYTHON) is $(HAVE) (make PYTHON=python3.11 ...))
endif
endif

.PHONY: install demo lint typecheck test test-quick bench bench-judges bench-longmemeval check-real-model soak clean

install: $(STAMP)

# A .venv made by another Python (or by one since removed) is rebuilt.
$(STAMP): pyproject.toml
	@if [ -e $(VENV) ] && [ "$$($(BIN)/python -c '$(VERSION)' 2>/dev/null)" != "$(FOUND)" ]; then \
	  echo "make: $(VENV) was not made by Python $(HAVE) ($(PYTHON)): rebuilding it"; rm -rf $(VENV); fi
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing Lethe and its test extras into $(VENV) (about a minute)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,postgres]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m engine.apps.demo

# The code the linter and the formatter hold to (settings in pyproject.toml: [tool.ruff])
LINTED := engine tests bench examples

lint: typecheck
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

# The type checker on engine/ (settings in pyproject.toml: [tool.mypy]); part of `make lint`
typecheck: $(STAMP)
	$(BIN)/mypy

# the suite as two pytest processes side by side, one per core (tests/run_in_two.py), the
# type checker beside them (a minute of CPU a fresh clone's cold cache costs, spread over
# theirs instead of before them), after the linter and the formatter check (seconds)
test: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/python tests/run_in_two.py --beside "$(BIN)/mypy"

# the quick subset for development: no process-level, PostgreSQL-parity or big-store tests
test-quick: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not soak"

# Every shipped policy against a served model (not part of `make test`: slow, and a model's
# answers vary with load): ../shared/tools/real-model/serve.sh 1.5b 8093 first
OPENAI_BASE_URL ?= http://127.0.0.1:8093/v1
REAL_ARGS ?= --record-dir bench/recorded

check-real-model: $(STAMP)
	OPENAI_BASE_URL=$(OPENAI_BASE_URL) $(BIN)/python -m bench.real_model $(REAL_ARGS)

# LongMemEval's official files (not in the repository: 120 MB); `make bench` runs it when
# they are there and says it skipped it when not
LME_DATA ?= ../shared/data/longmemeval
LME_ARGS ?= --types knowledge-update,temporal-reasoning --offline --workers 2

bench: $(STAMP)
	$(BIN)/python -m bench.run
	@if [ -f $(LME_DATA)/longmemeval_oracle.json ]; then $(MAKE) --no-print-directory bench-longmemeval; \
	  else echo "bench: no $(LME_DATA)/longmemeval_oracle.json: LongMemEval not run (LME_DATA=folder)"; fi

# The oracle file's knowledge-update and temporal-reasoning questions: the lifecycle (and
# lifecycle-local with the `local` extra) against archive, BM25 and embedding top-k; then,
# when the S file is there and LME_S is not 0, its 78 knowledge-update questions (about 240
# user turns each) against archive and BM25 (embedding top-k left out: encoding every turn
# of every haystack costs more than it tells beside BM25)
LME_S ?= 1
LME_S_ARGS ?= --types knowledge-update --offline --workers 2 --baseline archive --baseline bm25
bench-longmemeval: $(STAMP)
	$(BIN)/python -m bench.longmemeval --data $(LME_DATA)/longmemeval_oracle.json $(LME_ARGS) \
	  --out bench/data/longmemeval
	@if [ "$(LME_S)" != 0 ] && [ -f $(LME_DATA)/longmemeval_s_ku_tr.json ]; then \
	  $(BIN)/python -m bench.longmemeval --data $(LME_DATA)/longmemeval_s_ku_tr.json $(LME_S_ARGS) \
	    --out bench/data/longmemeval-s; \
	  else echo "bench-longmemeval: the S file's knowledge-update questions not run (LME_S=$(LME_S))"; fi

bench-judges: $(STAMP)
	$(BIN)/python -m bench.judges

soak: $(STAMP)
	$(BIN)/python -m pytest -m soak

clean:
	rm -rf $(VENV) demo-out .pytest_cache bench/data
