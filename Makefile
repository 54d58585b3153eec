# Two commands for a newcomer: `make demo` and `make test` (and `make tour`, to try it by
# hand). Each installs what it needs (a .venv with the package and its dev tools, and the
# pinned codex from npm) and is safe to run again.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CODEX_DIR := tools/codex
CODEX_STAMP := $(CODEX_DIR)/.installed
VENV_STAMP := $(VENV)/.installed

.PHONY: demo tour test venv codex lint format bench clean

demo: $(VENV_STAMP) $(CODEX_STAMP)
	$(VENV)/bin/loopx-chat --codex-bin $(CODEX_DIR)/node_modules/.bin/codex demo

# The hands-on variant: the mock and a throwaway home stay up while you type the steps it prints.
tour: $(VENV_STAMP) $(CODEX_STAMP)
	$(VENV)/bin/loopx-chat --codex-bin $(CODEX_DIR)/node_modules/.bin/codex demo --tour

# pytest exits 5 when it collected nothing: that must fail, never pass quietly.
test: $(VENV_STAMP) $(CODEX_STAMP)
	tools/ensure-system-tools.sh
	$(PY) -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

venv: $(VENV_STAMP)
codex: $(CODEX_STAMP)

$(VENV_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# The exact version lives in tools/codex/package.json; npm installs the native platform
# package beside the wrapper, which the controller spawns directly.
$(CODEX_STAMP): $(CODEX_DIR)/package.json
	npm install --prefix $(CODEX_DIR) --no-package-lock --no-audit --no-fund --loglevel=error
	touch $@

lint: $(VENV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV_STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(VENV_STAMP) $(CODEX_STAMP)
	$(PY) bench/bench_store.py

clean:
	rm -rf $(VENV) $(CODEX_DIR)/node_modules $(CODEX_STAMP)
