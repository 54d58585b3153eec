"""The LaunchAgent's pure rules, one at a time: the binding's checks (the home and the
CODEX_SQLITE_HOME that moves with it: absolute, printable, normalized; each source named),
the plist's exact shape and the fail-closed parse (control characters in keys, values or
arguments; the port read back from the arguments), and the installer defaults the plist
module owns (loopback host, chat port 8767, the launchd PATH; reference loopx-behaviour.md
§ LaunchAgent and launchd-codex-home-and-anchors.md)."""

from __future__ import annotations

import plistlib
import struct
from pathlib import Path

import pytest

from loopx_chat.errors import UsageError
from loopx_chat.launchagent.binding import (
    InstallBinding,
    LaunchdUser,
    resolve_install_binding,
    startup_files_to_read,
)
from loopx_chat.launchagent.installer import InstallerContext, LaunchAgentInstaller, Report
from loopx_chat.launchagent.plist import (
    AgentSpec,
    LaunchAgentError,
    ParsedPlist,
    build_plist,
    label_for,
    parse_plist,
    render_plist,
)

HOME = "/Users/me"


USER = LaunchdUser(home=HOME, name="me", shell="/bin/zsh")
SERVICE = ("/usr/local/bin/loopx-chat", "serve")


def _resolve(**kw: object) -> InstallBinding:
    args: dict[str, object] = {"explicit": None, "existing": None, "ambient_codex_home": None}
    merged = {**args, **kw}
    existing = merged["existing"]
    startup = (
        dict.fromkeys(startup_files_to_read(existing, USER))
        if isinstance(existing, ParsedPlist)
        else {}
    )
    got, _ = resolve_install_binding(**merged, user=USER, startup_text=startup)  # type: ignore[arg-type]
    return got


def _refused(code: str, **kw: object) -> LaunchAgentError:
    with pytest.raises(LaunchAgentError) as info:
        _resolve(**kw)
    assert info.value.error_code == code
    return info.value


# ---- binding --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"explicit": "/e//x/"}, InstallBinding("/e/x", "explicit")),
        ({"ambient_codex_home": "/a/./b"}, InstallBinding("/a/b", "ambient CODEX_HOME")),
        ({}, InstallBinding(f"{HOME}/.codex", "default")),
        (
            {"existing": ParsedPlist(data={}, program_arguments=SERVICE)},
            InstallBinding(
                f"{HOME}/.codex", "existing plist: no home variable, so $HOME/.codex", legacy=True
            ),
        ),
    ],
)
def test_each_source_is_named_and_the_path_normalized(
    kw: dict[str, object], expected: InstallBinding
) -> None:
    assert _resolve(**kw) == expected


@pytest.mark.parametrize("source", ["explicit", "ambient", "default"])
def test_the_sqlite_home_is_checked_like_the_home(source: str) -> None:
    kw: dict[str, object] = {
        "explicit": {"explicit": "/e"},
        "ambient": {"ambient_codex_home": "/a"},
        "default": {},
    }[source]
    assert _resolve(**kw, ambient_sqlite_home="/db/../sq/").sqlite_home == "/sq"
    assert _resolve(**kw, ambient_sqlite_home="~/sq").sqlite_home == f"{HOME}/sq"
    relative = _refused("codex_home_not_absolute", **kw, ambient_sqlite_home="db")
    assert "CODEX_SQLITE_HOME" in relative.message and "'db'" in relative.message
    control = _refused("codex_home_not_absolute", **kw, ambient_sqlite_home="/db\x07")
    assert "CODEX_SQLITE_HOME" in control.message and "control characters" in control.message


def test_an_existing_plists_sqlite_home_is_checked_too() -> None:
    env = {"LOOPX_CHAT_CODEX_HOME": "/h", "CODEX_SQLITE_HOME": "relative/db"}
    existing = ParsedPlist(data={}, environment=env, program_arguments=SERVICE)
    err = _refused("codex_home_not_absolute", existing=existing)
    assert "CODEX_SQLITE_HOME" in err.message
    env["CODEX_SQLITE_HOME"] = "/db//x"
    got = _resolve(existing=ParsedPlist(data={}, environment=env, program_arguments=SERVICE))
    assert (got.path, got.sqlite_home) == ("/h", "/db/x")


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x1f", "\x7f", "\n", "\t"])
def test_every_control_character_in_the_home_is_refused(char: str) -> None:
    err = _refused("codex_home_not_absolute", explicit=f"/h{char}x")
    assert "control characters" in err.message


def test_printable_unusual_characters_are_kept() -> None:
    assert _resolve(explicit="/h ~é&<x>").path == "/h ~é&<x>"


# ---- plist ----------------------------------------------------------------------------------


def _spec() -> AgentSpec:
    return AgentSpec(
        label="com.loopx.chat",
        program_arguments=("/usr/bin/python3", "-m", "loopx_chat", "serve"),
        environment={"LOOPX_CHAT_CODEX_HOME": "/h"},
        working_directory=HOME,
        stdout_path="/o.log",
        stderr_path="/e.log",
    )


def test_the_plist_has_exactly_the_canonical_keys() -> None:
    assert build_plist(_spec()) == {
        "Label": "com.loopx.chat",
        "ProgramArguments": ["/usr/bin/python3", "-m", "loopx_chat", "serve"],
        "EnvironmentVariables": {"LOOPX_CHAT_CODEX_HOME": "/h"},
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 10,
        "ProcessType": "Standard",
        "WorkingDirectory": HOME,
        "StandardOutPath": "/o.log",
        "StandardErrorPath": "/e.log",
        "SoftResourceLimits": {"NumberOfFiles": 8192},
    }


def test_rendering_is_xml_with_sorted_keys() -> None:
    data = render_plist({"b": 1, "a": 2})
    assert data.startswith(b"<?xml")
    assert data.index(b"<key>a</key>") < data.index(b"<key>b</key>")
    assert plistlib.loads(data) == {"a": 2, "b": 1}


@pytest.mark.parametrize(
    ("prefix", "label"), [(None, "com.loopx.chat"), ("", "com.loopx.chat"), ("org.x", "org.x.chat")]
)
def test_labels(prefix: str | None, label: str) -> None:
    assert label_for(prefix) == label


def test_a_parsed_plist_keeps_its_data_environment_and_arguments() -> None:
    parsed = parse_plist(render_plist(build_plist(_spec())), where="w")
    assert parsed.environment == {"LOOPX_CHAT_CODEX_HOME": "/h"}
    assert parsed.program_arguments == ("/usr/bin/python3", "-m", "loopx_chat", "serve")
    assert parsed.data["Label"] == "com.loopx.chat"
    bare = parse_plist(plistlib.dumps({}), where="w")
    assert (bare.environment, bare.program_arguments) == ({}, ())


@pytest.mark.parametrize(
    "data",
    [
        {"EnvironmentVariables": {"A\x01": "v"}},
        {"EnvironmentVariables": {"A": "v\x1b"}},
        {"ProgramArguments": ["/bin/x", "a\x08"]},
        {"EnvironmentVariables": {"A": "v\x0b"}},
        {"EnvironmentVariables": {"A": "v\x0c"}},
    ],
)
def test_control_characters_anywhere_are_malformed(data: dict[str, object]) -> None:
    raw = plistlib.dumps(data, fmt=plistlib.FMT_BINARY)  # XML could not even carry them
    with pytest.raises(LaunchAgentError) as info:
        parse_plist(raw, where="/p.plist")
    assert info.value.error_code == "plist_malformed"
    assert "control characters" in info.value.message


def test_tabs_and_newlines_are_not_control_characters_for_the_plist() -> None:
    data = {"EnvironmentVariables": {"A": "x\ty\nz\r"}, "ProgramArguments": ["a\tb"]}
    parsed = parse_plist(plistlib.dumps(data, fmt=plistlib.FMT_BINARY), where="w")
    assert parsed.environment == {"A": "x\ty\nz\r"}
    assert parsed.program_arguments == ("a\tb",)


def test_environment_values_must_be_strings_even_when_the_key_is_one() -> None:
    with pytest.raises(LaunchAgentError) as info:
        parse_plist(plistlib.dumps({"EnvironmentVariables": {"A": ["v"]}}), where="w")
    assert "EnvironmentVariables" in info.value.message


def test_a_truncated_binary_plist_is_malformed_not_a_traceback() -> None:
    raw = plistlib.dumps(build_plist(_spec()), fmt=plistlib.FMT_BINARY)
    for cut in (8, len(raw) // 2, len(raw) - 1):
        with pytest.raises(LaunchAgentError) as info:
            parse_plist(raw[:cut], where="w")
        assert info.value.error_code == "plist_malformed"


def _nested_binary_plist(depth: int) -> bytes:
    """A binary plist of `depth` arrays, each holding the next: plistlib recurses per level."""
    objects = [b"\xa1" + struct.pack(">H", i + 1) for i in range(depth)] + [b"\x51a"]
    body, offsets = b"bplist00", []
    for obj in objects:
        offsets.append(len(body))
        body += obj
    table = len(body)
    body += b"".join(struct.pack(">I", offset) for offset in offsets)
    return body + struct.pack(">6xBBQQQ", 4, 2, len(objects), 0, table)


def test_an_error_plistlib_does_not_name_is_still_malformed_not_a_traceback() -> None:
    with pytest.raises(LaunchAgentError) as info:
        parse_plist(_nested_binary_plist(5000), where="/deep.plist")
    assert info.value.error_code == "plist_malformed"
    assert "(RecursionError)" in info.value.message


@pytest.mark.parametrize(
    ("args", "port"),
    [
        (["x", "--port", "8123"], 8123),
        (["x", "--port=9000"], 9000),
        (["x", "--port", "1"], 1),
        (["x", "--port", "65535"], 65535),
        (["x", "--port", "0"], None),
        (["x", "--port", "65536"], None),
        (["x", "--port", "123456"], None),
        (["x", "--port", "-1"], None),
        (["x", "--port"], None),
        (["x", "--port="], None),
        (["--port", "80", "--port", "81"], 80),
        (["x", "--port", "abc", "--port=7000"], 7000),
        (["--port=80x", "8080"], None),
        ([], None),
    ],
)
def test_the_port_is_read_from_the_arguments(args: list[str], port: int | None) -> None:
    assert ParsedPlist(data={}, program_arguments=tuple(args)).port() == port


# ---- the installer defaults the plist module owns -------------------------------------------


def test_the_service_listens_on_loopback_port_8767_with_the_launchd_path(tmp_path: Path) -> None:
    ctx = InstallerContext(
        environ={"PATH": str(tmp_path), "LOOPX_LAUNCHAGENT_ALLOW_NON_DARWIN": "1"},
        user_home=str(tmp_path),
        uid=501,
        platform="darwin",
        codex_bin="codex-that-is-not-there",
        service_argv=("/py", "-m", "loopx_chat"),
    )
    installer = LaunchAgentInstaller(ctx, launchctl_factory=lambda: pytest.fail("no launchctl"))
    report = Report(action="status", label="l", plist_path="p")
    assert (report.port, report.to_dict()["url"]) == (8767, "http://127.0.0.1:8767/")
    warnings: list[str] = []
    data, kept, dropped = installer.build(InstallBinding("/h", "explicit"), None, 8767, warnings)
    assert (kept, dropped) == ([], [])
    parsed = parse_plist(data, where="generated")
    assert parsed.program_arguments[-6:] == (
        "--host",
        "127.0.0.1",
        "--port",
        "8767",
        "--notify",
        "desktop",
    )
    # A chosen notice mode and webhook are carried, and an upgrade that names none keeps them.
    data, _, _ = installer.build(
        InstallBinding("/h", "explicit"), None, 8767, [], notify="both", notify_url="http://h/x"
    )
    chosen = parse_plist(data, where="generated")
    assert chosen.program_arguments[-4:] == ("--notify", "both", "--notify-url", "http://h/x")
    again, _, _ = installer.build(InstallBinding("/h", "explicit"), chosen, 8767, [])
    kept_args = parse_plist(again, where="generated").program_arguments
    assert kept_args[-4:] == ("--notify", "both", "--notify-url", "http://h/x")
    # A webhook mode with no webhook anywhere would make `serve` exit at every launchd start.
    with pytest.raises(UsageError) as no_url:
        installer.build(InstallBinding("/h", "explicit"), None, 8767, [], notify="webhook")
    assert no_url.value.error_code == "usage_error" and "--notify-url" in no_url.value.message
    # So is the approval policy the service's turns run under; `never` is its own default.
    data, _, _ = installer.build(
        InstallBinding("/h", "explicit"), None, 8767, [], approval="untrusted"
    )
    asked = parse_plist(data, where="generated")
    assert asked.program_arguments[-2:] == ("--approval", "untrusted")
    again, _, _ = installer.build(InstallBinding("/h", "explicit"), asked, 8767, [])
    assert parse_plist(again, where="generated").option("--approval") == "untrusted"
    # And the public URL of the owner's proxy (the phone's way in), kept by an upgrade.
    data, _, _ = installer.build(
        InstallBinding("/h", "explicit"), None, 8767, [], public_url="https://mac.ts.example"
    )
    public = parse_plist(data, where="generated")
    assert public.program_arguments[-2:] == ("--public-url", "https://mac.ts.example")
    again, _, _ = installer.build(InstallBinding("/h", "explicit"), public, 8767, [])
    assert parse_plist(again, where="generated").option("--public-url") == "https://mac.ts.example"
    data, _, _ = installer.build(
        InstallBinding("/h", "explicit"), asked, 8767, [], approval="never"
    )
    assert "--approval" not in parse_plist(data, where="generated").program_arguments
    # launchd's own PATH is /usr/bin:/bin:/usr/sbin:/sbin; Homebrew's two go first.
    assert parsed.environment["PATH"] == (
        "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
    )
    assert parsed.port() == 8767


# ---- the existing plist's own rules (`binding.existing_binding`) ---------------------------


def _existing(
    env: dict[str, str] | None = None, args: tuple[str, ...] = SERVICE, **data: object
) -> ParsedPlist:
    return ParsedPlist(data=data, environment=env or {}, program_arguments=args)


@pytest.mark.parametrize(
    ("program", "args"),
    [("/usr/local/bin/other", SERVICE), (SERVICE[0], ()), ("", SERVICE)],
    ids=["another program", "no arguments", "empty"],
)
def test_a_program_key_other_than_the_first_argument_is_refused_by_its_rule(
    program: str, args: tuple[str, ...]
) -> None:
    """launchd runs `Program` with `ProgramArguments` as its argv: when they differ, what
    runs is not what the arguments say, so nothing read from them can be trusted."""
    existing = _existing({"CODEX_HOME": "/h"}, args, Program=program)
    err = _refused("legacy_binding_ambiguous", existing=existing)
    assert err.detail == "program_key"  # type: ignore[attr-defined]


def test_a_program_key_equal_to_the_first_argument_is_read_as_usual() -> None:
    got = _resolve(existing=_existing({"CODEX_HOME": "/h"}, Program=SERVICE[0]))
    assert (got.path, got.legacy) == ("/h", True)


@pytest.mark.parametrize(
    "existing",
    [_existing(args=("/usr/bin/env", "-i", *SERVICE)), _existing({"HOME": ""})],
    ids=["env -i", "HOME empty"],
)
def test_a_service_started_without_home_is_refused_by_its_rule(existing: ParsedPlist) -> None:
    """Without HOME the service's `~/.codex` comes from the user database, which the old
    job never named: refused rather than guessed."""
    err = _refused("legacy_binding_ambiguous", existing=existing)
    assert err.detail == "home_unset"  # type: ignore[attr-defined]


def test_an_existing_plists_sqlite_home_expands_tilde_against_the_services_home() -> None:
    env = {"LOOPX_CHAT_CODEX_HOME": "~/h", "CODEX_SQLITE_HOME": "~/db", "HOME": "/Users/job"}
    got = _resolve(existing=_existing(env))
    assert (got.path, got.sqlite_home) == ("/Users/job/h", "/Users/job/db")


@pytest.mark.parametrize(
    ("env", "args", "legacy"),
    [
        ({"LOOPX_CHAT_CODEX_HOME": "/h"}, SERVICE, False),
        ({"CODEX_HOME": "/h"}, SERVICE, True),
        ({"LOOPX_CHAT_CODEX_HOME": "/h"}, ("/bin/sh", "-c", f"exec {' '.join(SERVICE)}"), True),
        ({}, ("/bin/sh", "-c", f"LOOPX_CHAT_CODEX_HOME=/h exec {' '.join(SERVICE)}"), True),
    ],
    ids=["ours, direct", "CODEX_HOME", "ours, through a shell", "set by the script"],
)
def test_only_our_own_variable_given_straight_to_the_program_is_not_legacy(
    env: dict[str, str], args: tuple[str, ...], legacy: bool
) -> None:
    got = _resolve(existing=_existing(env, args))
    assert (got.path, got.legacy) == ("/h", legacy)


def test_the_plist_offers_the_approval_policies_the_service_takes() -> None:
    from loopx_chat.codex.turn_defaults import APPROVAL_POLICIES
    from loopx_chat.launchagent.plist import APPROVAL_MODES

    assert APPROVAL_MODES == APPROVAL_POLICIES
