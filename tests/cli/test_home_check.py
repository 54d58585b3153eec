"""`home check` checks the codex it will run: found, runnable, its version against the tested
range, every protocol method loopx-chat uses in its own schema; and the home's sign-in.

The pinned codex is checked as it is; another release is the schema recorded from it
(tests/fixtures/codex-schema/, tools/record-codex-schema) replayed by `schema_codex.py`, with
a method taken out; a "newer" codex is the real one reporting another version."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from loopx_chat.cli import main
from loopx_chat.codex.compat import TESTED_RANGE, USED_METHODS
from loopx_chat.codex.compat_probe import summary_line
from loopx_chat.codex.offline_config import write_offline_codex_config
from tests.helpers.fakes import SCHEMA_CODEX
from tests.helpers.paths import CODEX_SCHEMAS


def _check(
    state: Path, home: Path, codex: str, *args: str, env: dict[str, str] | None = None
) -> Result:
    return CliRunner().invoke(
        main,
        ["--state-dir", str(state), "--codex-bin", codex, "home", "check", *args],
        env={"LOOPX_CHAT_CODEX_HOME": str(home), **(env or {})},
    )


def _doc(result: Result) -> dict[str, Any]:
    return json.loads(result.stdout)


def _mock_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_offline_codex_config(home, "http://127.0.0.1:9/v1")
    return home


def _schema_codex(tmp_path: Path, **env: str) -> str:
    """A `codex` that is `schema_codex.py` with `env` (FAKE_CODEX_VERSION, ...) baked in."""
    exe = tmp_path / "fakebin" / "codex"
    exe.parent.mkdir(exist_ok=True)
    exports = "".join(f"export {k}='{v}'\n" for k, v in env.items())
    exe.write_text(f'#!/bin/sh\n{exports}exec "{sys.executable}" "{SCHEMA_CODEX}" "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def test_a_missing_codex_is_named_with_its_code_and_a_non_zero_exit(tmp_path: Path) -> None:
    home = _mock_home(tmp_path)
    result = _check(tmp_path / "state", home, "/nonexistent/codex", "--json")
    assert result.exit_code == 1, result.output
    doc = _doc(result)
    assert doc["ok"] is False and doc["error_code"] == "host_tool_unavailable"
    assert doc["codex"]["found"] is False and doc["codex"]["gate"]["next_action"]
    human = _check(tmp_path / "state", home, "/nonexistent/codex")
    assert human.exit_code == 1
    assert "problem [host_tool_unavailable]" in human.stdout and human.stdout.endswith("not ok\n")


def test_a_codex_that_does_not_run_is_not_runnable(tmp_path: Path) -> None:
    broken = tmp_path / "bin" / "codex"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    result = _check(tmp_path / "state", _mock_home(tmp_path), str(broken), "--json")
    assert result.exit_code == 1
    doc = _doc(result)
    assert doc["error_code"] == "codex_not_runnable"
    assert doc["codex"]["found"] is True and doc["codex"]["runnable"] is False


def test_the_codex_under_test_has_every_method_and_a_second_check_is_cached(
    tmp_path: Path, codex_bin: str, codex_version: str
) -> None:
    home = _mock_home(tmp_path)
    version = codex_version
    first = _check(tmp_path / "state", home, codex_bin, "--json")
    assert first.exit_code == 0, first.output
    doc = _doc(first)
    assert doc["ok"] is True and doc["error_code"] is None
    assert doc["codex"]["version"] == version and doc["codex"]["range"] == "inside"
    assert doc["codex"]["schema_checked"] is True and doc["codex"]["missing"] == []
    assert doc["codex"]["tested_range"] == TESTED_RANGE.to_dict()
    assert doc["codex"]["cached"] is False
    assert doc["sign_in"] == {
        "provider": "mock",
        "needed": False,
        "signed_in": None,
        "how": "not needed",
    }
    second = _doc(_check(tmp_path / "state", home, codex_bin, "--json"))
    assert second["codex"]["cached"] is True and second["codex"]["version"] == version
    human = _check(tmp_path / "state", home, codex_bin)
    assert f"codex {version}: inside the tested range" in human.stdout
    assert f"all {len(USED_METHODS)} methods" in human.stdout and human.stdout.endswith("ok\n")


def test_an_older_codex_without_a_method_names_it_and_the_features_it_breaks(
    tmp_path: Path,
) -> None:
    oldest = TESTED_RANGE.oldest
    log = tmp_path / "schema-codex.log"
    codex = _schema_codex(
        tmp_path,
        FAKE_CODEX_VERSION=oldest,
        FAKE_CODEX_SCHEMA=str(CODEX_SCHEMAS / oldest),
        FAKE_CODEX_REMOVE="thread/goal/set",
        FAKE_CODEX_LOG=str(log),
    )
    home = _mock_home(tmp_path)
    result = _check(tmp_path / "state", home, codex, "--json")
    assert result.exit_code == 1, result.output
    doc = _doc(result)
    assert doc["error_code"] == "codex_protocol_missing"
    assert [m["method"] for m in doc["codex"]["missing"]] == ["thread/goal/set"]
    assert doc["codex"]["features_unavailable"] == ["goal runs"]
    assert "thread/goal/set" in doc["problems"][0] and "goal runs" in doc["problems"][0]
    runs = len(log.read_text().splitlines())
    # The verdict is cached per binary: a second check runs nothing, and says the same.
    again = _check(tmp_path / "state", home, codex)
    assert len(log.read_text().splitlines()) == runs
    assert "problem [codex_protocol_missing]" in again.stdout
    assert "not working: goal runs" in again.stdout and again.exit_code == 1
    # The same recording, whole, is a codex loopx-chat can use.
    whole = _schema_codex(
        tmp_path, FAKE_CODEX_VERSION=oldest, FAKE_CODEX_SCHEMA=str(CODEX_SCHEMAS / oldest)
    )
    assert _check(tmp_path / "state2", home, whole).exit_code == 0


def test_a_codex_whose_binary_changed_is_checked_again(tmp_path: Path) -> None:
    oldest = TESTED_RANGE.oldest
    home = _mock_home(tmp_path)
    schema = str(CODEX_SCHEMAS / oldest)
    codex = _schema_codex(tmp_path, FAKE_CODEX_VERSION=oldest, FAKE_CODEX_SCHEMA=schema)
    assert _doc(_check(tmp_path / "state", home, codex, "--json"))["ok"] is True
    _schema_codex(
        tmp_path,
        FAKE_CODEX_VERSION=oldest,
        FAKE_CODEX_SCHEMA=schema,
        FAKE_CODEX_REMOVE="turn/steer",
    )  # the same path, a new file (another size)
    doc = _doc(_check(tmp_path / "state", home, codex, "--json"))
    assert doc["codex"]["cached"] is False and doc["error_code"] == "codex_protocol_missing"


def test_a_newer_codex_is_a_warning_not_a_refusal(tmp_path: Path, codex_bin: str) -> None:
    codex = _schema_codex(tmp_path, FAKE_CODEX_VERSION="0.180.0", FAKE_CODEX_REAL=codex_bin)
    result = _check(tmp_path / "state", _mock_home(tmp_path), codex, "--json")
    assert result.exit_code == 0, result.output
    doc = _doc(result)
    assert doc["ok"] is True and doc["codex"]["range"] == "newer"
    assert any("0.180.0 is newer than loopx-chat was tested on" in w for w in doc["warnings"])
    human = _check(tmp_path / "state", _mock_home(tmp_path), codex)
    assert "warning: codex 0.180.0 is newer" in human.stdout and human.stdout.endswith("ok\n")


def test_an_empty_home_is_not_signed_in(tmp_path: Path, codex_bin: str) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    result = _check(tmp_path / "state", home, codex_bin, "--json")
    assert result.exit_code == 1
    doc = _doc(result)
    assert doc["error_code"] == "codex_not_signed_in" and doc["config_present"] is False
    assert doc["sign_in"]["provider"] == "openai" and doc["sign_in"]["signed_in"] is False
    assert any("no config.toml" in w for w in doc["warnings"])
    assert list(home.iterdir()) == []  # nothing was written into the home
    (home / "auth.json").write_text("{}")
    signed = _doc(_check(tmp_path / "state", home, codex_bin, "--json"))
    assert signed["ok"] is True and signed["sign_in"]["signed_in"] is True


def test_a_provider_with_an_env_key_needs_that_variable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        'model_provider = "corp"\n[model_providers.corp]\nbase_url = "http://127.0.0.1:9"\n'
        'env_key = "CORP_KEY"\n'
    )
    doc = _doc(_check(tmp_path / "state", home, "/nonexistent/codex", "--json"))
    assert doc["sign_in"] == {
        "provider": "corp",
        "needed": True,
        "signed_in": False,
        "how": "CORP_KEY unset",
    }
    assert "codex_not_signed_in" in doc["problem_codes"]
    env = {"CORP_KEY": "x"}
    doc = _doc(_check(tmp_path / "state", home, "/nonexistent/codex", "--json", env=env))
    assert doc["sign_in"]["signed_in"] is True and "codex_not_signed_in" not in doc["problem_codes"]


def test_the_summary_line_carries_no_path(tmp_path: Path, codex_bin: str) -> None:
    from loopx_chat.codex.compat_probe import check_codex

    line = summary_line(check_codex(codex_bin, {}, tmp_path / "state"))
    assert "/" not in line.replace(f"{TESTED_RANGE.oldest}-{TESTED_RANGE.newest}", "")
    assert line.startswith("codex ") and "inside the tested range" in line
