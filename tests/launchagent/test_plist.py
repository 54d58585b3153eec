"""One test per rule of `launchagent/plist.py` that decides what an upgrade keeps: which plist
is ours, which argv starts the service, and what of a user's plist survives a reinstall.

Expected values come from the rules as the installer documents them (README's LaunchAgent
section, `merge_user_additions`' contract), written out here, never read from the module's
tables: every key the installer owns, every key a user may tune, each on both sides of the
rule."""

from __future__ import annotations

import plistlib
from typing import Any

import pytest

from loopx_chat.launchagent.plist import (
    LaunchAgentError,
    ParsedPlist,
    is_own_plist,
    is_service_argv,
    merge_user_additions,
    parse_plist,
)

# Written from the docs, independent of OWN_ENV_KEYS / USER_TUNABLE_KEYS.
INSTALLER_ENV = (
    "LOOPX_CHAT_CODEX_HOME",
    "PATH",
    "LOOPX_CHAT_CODEX_BIN",
    "CODEX_SQLITE_HOME",
    "LOOPX_CHAT_STATE_DIR",
    "CODEX_HOME",
)
TUNABLE = ("StandardOutPath", "StandardErrorPath", "ProcessType")

OURS: dict[str, Any] = {
    "Label": "com.loopx.chat",
    "ProgramArguments": ["/usr/local/bin/loopx-chat", "serve"],
    "EnvironmentVariables": {"LOOPX_CHAT_CODEX_HOME": "/h", "PATH": "/usr/bin:/bin"},
    "RunAtLoad": True,
    "ProcessType": "Background",
    "StandardOutPath": "/logs/out.log",
    "StandardErrorPath": "/logs/err.log",
}


def _merge(theirs: dict[str, Any], *, own: bool) -> tuple[dict[str, Any], list[str], list[str]]:
    return merge_user_additions(OURS, theirs, own=own)


# ---- which argv starts the service -------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "service"),
    [
        (["/usr/local/bin/loopx-chat", "serve"], True),
        (["loopx-chat"], True),
        (["/opt/bin/loopx", "serve"], True),  # the public LoopX name
        (["/usr/bin/python3", "-m", "loopx_chat", "serve"], True),
        (["python", "-m", "loopx_chat"], True),
        (["/x/python3.12", "-m", "loopx_chat", "serve"], True),
        (["/x/python3.12", "-m", "loopx_chatx", "serve"], False),
        (["/x/python3.12", "-m", "other", "serve"], False),
        (["/x/python3.12", "loopx_chat", "-m"], False),
        (["/x/python3x", "-m", "loopx_chat"], False),
        (["/x/pythonw", "-m", "loopx_chat"], False),
        (["/x/python", "-m"], False),
        (["/bin/sh", "-c", "exec loopx-chat serve"], False),
        (["/usr/local/bin/loopx-chat-old", "serve"], False),
        ([], False),
    ],
)
def test_which_argv_starts_the_service_directly(argv: list[str], service: bool) -> None:
    assert is_service_argv(argv) is service


@pytest.mark.parametrize(
    ("argv", "env", "own"),
    [
        (("/usr/local/bin/loopx-chat", "serve"), {"LOOPX_CHAT_CODEX_HOME": "/h"}, True),
        (("/usr/bin/python3", "-m", "loopx_chat", "serve"), {"LOOPX_CHAT_CODEX_HOME": "/h"}, True),
        (("/usr/local/bin/loopx-chat", "status"), {"LOOPX_CHAT_CODEX_HOME": "/h"}, False),
        (("/usr/local/bin/loopx-chat", "serve"), {"CODEX_HOME": "/h"}, False),
        (("/usr/local/bin/loopx-chat", "serve"), {}, False),
        (("/bin/sh", "-c", "exec loopx-chat serve"), {"LOOPX_CHAT_CODEX_HOME": "/h"}, False),
        (("/usr/bin/env", "loopx-chat", "serve"), {"LOOPX_CHAT_CODEX_HOME": "/h"}, False),
    ],
)
def test_a_plist_is_ours_only_as_the_installer_writes_it(
    argv: tuple[str, ...], env: dict[str, str], own: bool
) -> None:
    parsed = ParsedPlist(data={}, environment=env, program_arguments=argv)
    assert is_own_plist(parsed) is own


# ---- what an upgrade of our own plist keeps -------------------------------------------------


def test_an_upgrade_keeps_the_launchd_keys_a_user_added() -> None:
    theirs = {**OURS, "Nice": 5, "LowPriorityIO": True}
    merged, kept, dropped = _merge(theirs, own=True)
    assert (merged["Nice"], merged["LowPriorityIO"]) == (5, True)
    assert (kept, dropped) == (["LowPriorityIO", "Nice"], [])


@pytest.mark.parametrize("key", TUNABLE)
def test_an_upgrade_keeps_a_users_value_of_each_tunable_key(key: str) -> None:
    theirs = {**OURS, key: "Interactive" if key == "ProcessType" else "/mine.log"}
    merged, kept, dropped = _merge(theirs, own=True)
    assert merged[key] == theirs[key]
    assert (kept, dropped) == ([key], [])


@pytest.mark.parametrize("key", TUNABLE)
def test_a_tunable_key_left_as_we_wrote_it_is_not_reported_as_kept(key: str) -> None:
    merged, kept, dropped = _merge(dict(OURS), own=True)
    assert merged[key] == OURS[key] and (kept, dropped) == ([], [])


@pytest.mark.parametrize("key", ["Label", "ProgramArguments", "RunAtLoad"])
def test_an_upgrade_writes_our_value_of_every_other_key_we_set(key: str) -> None:
    theirs = {**OURS, key: "changed by hand"}
    merged, kept, dropped = _merge(theirs, own=True)
    assert merged[key] == OURS[key]
    assert (kept, dropped) == ([], [])


def test_an_upgrade_keeps_the_users_own_environment_variables() -> None:
    env = {**OURS["EnvironmentVariables"], "EDITOR": "vi", "AWS_PROFILE": "work"}
    merged, kept, dropped = _merge({**OURS, "EnvironmentVariables": env}, own=True)
    assert merged["EnvironmentVariables"] == {
        **OURS["EnvironmentVariables"],
        "AWS_PROFILE": "work",
        "EDITOR": "vi",
    }
    assert kept == ["EnvironmentVariables.AWS_PROFILE", "EnvironmentVariables.EDITOR"]
    assert dropped == []
    assert OURS["EnvironmentVariables"] == {"LOOPX_CHAT_CODEX_HOME": "/h", "PATH": "/usr/bin:/bin"}


@pytest.mark.parametrize("name", INSTALLER_ENV)
def test_an_upgrade_never_keeps_a_users_value_of_a_variable_the_installer_owns(name: str) -> None:
    env = {**OURS["EnvironmentVariables"], name: "/users/value"}
    merged, kept, dropped = _merge({**OURS, "EnvironmentVariables": env}, own=True)
    assert merged["EnvironmentVariables"].get(name) == OURS["EnvironmentVariables"].get(name)
    assert kept == []
    # A second home variable beside ours is said to be gone; the others are simply ours.
    assert dropped == (["EnvironmentVariables.CODEX_HOME"] if name == "CODEX_HOME" else [])


@pytest.mark.parametrize("env", ["not a dictionary", ["EDITOR"], None])
def test_an_environment_that_is_not_a_mapping_adds_nothing(env: object) -> None:
    merged, kept, dropped = _merge({**OURS, "EnvironmentVariables": env}, own=True)
    assert merged["EnvironmentVariables"] == OURS["EnvironmentVariables"]
    assert (kept, dropped) == ([], [])


# ---- what replacing a foreign plist drops -------------------------------------------------


def test_a_foreign_plist_keeps_nothing_and_every_key_not_ours_is_listed() -> None:
    theirs = {
        **OURS,
        "Nice": 5,
        "StandardOutPath": "/mine.log",
        "EnvironmentVariables": {"EDITOR": "vi", "PATH": "/mine", "CODEX_HOME": "/old"},
    }
    merged, kept, dropped = _merge(theirs, own=False)
    assert merged == OURS
    assert kept == []
    assert dropped == [
        "Nice",
        "EnvironmentVariables.CODEX_HOME",
        "EnvironmentVariables.EDITOR",
    ]


@pytest.mark.parametrize("name", INSTALLER_ENV)
def test_a_foreign_plists_variable_we_own_is_listed_unless_ours_replaces_it(name: str) -> None:
    merged, _kept, dropped = _merge({"EnvironmentVariables": {name: "/theirs"}}, own=False)
    replaced = name in OURS["EnvironmentVariables"] and name != "CODEX_HOME"
    assert dropped == ([] if replaced else [f"EnvironmentVariables.{name}"])
    assert merged["EnvironmentVariables"] == OURS["EnvironmentVariables"]


# ---- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"not a plist at all",  # InvalidFileException
        b'<?xml version="1.0"?><plist><dict><key>a</key>',  # ExpatError
        b"<?xml version='1.0'?><plist><integer>x</integer></plist>",  # ValueError
        b"bplist00" + b"\xff" * 40,  # a damaged binary plist
    ],
)
def test_whatever_plistlib_raises_is_plist_malformed(raw: bytes) -> None:
    with pytest.raises(LaunchAgentError) as info:
        parse_plist(raw, where="here")
    assert info.value.error_code == "plist_malformed"
    assert "here" in info.value.message and "left untouched" in info.value.message


def test_a_plist_that_parses_keeps_its_parts() -> None:
    parsed = parse_plist(plistlib.dumps(OURS), where="here")
    assert parsed.environment == OURS["EnvironmentVariables"]
    assert parsed.program_arguments == tuple(OURS["ProgramArguments"])


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        ([1, 2], "top level is not a dictionary"),
        ("text", "top level is not a dictionary"),
        ({"ProgramArguments": "/usr/local/bin/loopx-chat serve"}, "ProgramArguments is not a list"),
        (
            {"ProgramArguments": ["/usr/local/bin/loopx-chat", 8767]},
            "ProgramArguments is not a list",
        ),
        ({"EnvironmentVariables": ["A=1"]}, "EnvironmentVariables is not a dictionary"),
        ({"EnvironmentVariables": {"A": 1}}, "EnvironmentVariables is not a dictionary"),
    ],
)
def test_each_shape_the_installer_cannot_trust_is_refused_by_name(
    data: object, detail: str
) -> None:
    with pytest.raises(LaunchAgentError) as info:
        parse_plist(plistlib.dumps(data), where="here")  # type: ignore[arg-type]
    assert info.value.error_code == "plist_malformed" and detail in info.value.message
