# Two commands for a newcomer: `make demo` and `make test` (and `make tour`, to try it by
# hand). Each installs what it needs (a .venv with the package and its dev tools, and the
# pinned codex from npm) and is safe to run again.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CODEX_DIR := tools/codex
CODEX_STAMP := $(CODEX_DIR)/.installed
VENV_STAMP := $(VENV)/.installed
# The oldest codex of the tested range (loopx_chat/codex/compat.py TESTED_RANGE), for
# `make test-oldest`; its exact version is in tools/codex-oldest/package.json.
OLDEST_DIR := tools/codex-oldest
OLDEST_STAMP := $(OLDEST_DIR)/.installed
# `make test CODEX_BIN=/path/to/codex` runs the suite on another codex (LOOPX_TEST_CODEX_BIN);
# empty: the pinned one. Tests that compare with recordings of the pinned codex (the
# transcript drift test) fail on another release by design.
CODEX_BIN ?=
# The small set `make test-oldest` runs on the oldest codex: the demo and the late interrupt,
# the protocol check (`home check`), goal runs, an approval, an MCP tool approval, and a
# model that cannot be reached.
OLDEST_TESTS := tests/integration/test_codex_releases.py \
	tests/cli/test_home_check.py::test_the_codex_under_test_has_every_method_and_a_second_check_is_cached \
	tests/integration/test_goal_run.py::test_the_agent_completes_then_accept_and_reopen \
	tests/integration/test_goal_run.py::test_a_run_to_its_budget_agrees_with_the_host_and_codex_facts \
	tests/integration/test_approval_policy.py::test_the_policy_decides_whether_codex_asks_before_a_command \
	tests/integration/test_host_questions.py::test_an_mcp_servers_question_is_a_host_gate_answered_with_its_fields \
	tests/integration/test_unreachable_model.py

.PHONY: demo tour test test-oldest venv codex codex-oldest lint format bench clean

demo: $(VENV_STAMP) $(CODEX_STAMP)
	$(VENV)/bin/loopx-chat --codex-bin $(CODEX_DIR)/node_modules/.bin/codex demo

# The hands-on variant: the mock and a throwaway home stay up while you type the steps it prints.
tour: $(VENV_STAMP) $(CODEX_STAMP)
	$(VENV)/bin/loopx-chat --codex-bin $(CODEX_DIR)/node_modules/.bin/codex demo --tour

# pytest exits 5 when it collected nothing: that must fail, never pass quietly.
test: $(VENV_STAMP) $(CODEX_STAMP)
	tools/ensure-system-tools.sh
	LOOPX_TEST_CODEX_BIN="$(CODEX_BIN)" $(PY) -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

# The small set above on the oldest codex of the tested range (CI runs it after `make test`).
test-oldest: $(VENV_STAMP) $(OLDEST_STAMP)
	LOOPX_TEST_CODEX_BIN="$(CURDIR)/$(OLDEST_DIR)/node_modules/.bin/codex" \
	$(PY) -m pytest $(OLDEST_TESTS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-oldest: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

venv: $(VENV_STAMP)
codex: $(CODEX_STAMP)
codex-oldest: $(OLDEST_STAMP)

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

$(OLDEST_STAMP): $(OLDEST_DIR)/package.json
	npm install --prefix $(OLDEST_DIR) --no-package-lock --no-audit --no-fund --loglevel=error
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
	rm -rf $(VENV) $(CODEX_DIR)/node_modules $(CODEX_STAMP) $(OLDEST_DIR)/node_modules $(OLDEST_STAMP)
