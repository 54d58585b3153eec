"""The systemd units, pure: what is written reads back to the same binding and argv (also
through Debian's `systemd-analyze verify`), which lines are ours and which the user's, the
binding an installed unit runs with (drop-ins and environment files included), and every
shape the parser refuses."""

from __future__ import annotations

import posixpath
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopx_chat.systemd.binding import (
    InstalledUnit,
    UnitBinding,
    existing_binding,
    resolve_binding,
    service_environment,
)
from loopx_chat.systemd.unit import (
    SERVICE_UNIT,
    SOCKET_UNIT,
    ParsedUnit,
    ServiceUnitError,
    UnitSpec,
    merge_user_lines,
    parse_unit,
    render_service,
    render_socket,
)
from tests.helpers.systemd import verify_units

HOME = "/home/me"
ARGV = ("/usr/bin/loopx-chat", "serve", "--host", "127.0.0.1", "--port", "8767")


def unit_for(home: str, argv: tuple[str, ...] = ARGV) -> str:
    binding = UnitBinding(home, "explicit")
    env = service_environment(binding, "/opt/codex bin/codex", None)
    return render_service(UnitSpec(argv=argv, environment=env, working_directory=HOME))


def parsed(text: str, where: str = "/u/loopx-chat.service") -> ParsedUnit:
    return parse_unit(text, where=where, user_home=HOME)


def installed(
    text: str, *dropins: str, files: dict[str, str | None] | None = None
) -> InstalledUnit:
    return InstalledUnit(
        parsed(text),
        tuple(parsed(d, f"/u/loopx-chat.service.d/{i}.conf") for i, d in enumerate(dropins)),
        files or {},
    )


# Any absolute path of printable characters, systemd's own specials included.
segment = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\x00"),
    min_size=1,
    max_size=20,
).filter(lambda s: s not in (".", ".."))
homes = st.builds(lambda parts: "/" + "/".join(parts), st.lists(segment, min_size=1, max_size=3))
tricky = st.sampled_from(['/a b/"q"', "/100%/h", "/$HOME/x", "/back\\slash", "/ü n/%h%%", "/a'b"])


@given(home=st.one_of(tricky, homes), url=st.one_of(tricky, homes))
@settings(max_examples=300)
def test_the_binding_and_argv_read_back_exactly(home: str, url: str) -> None:
    argv = (*ARGV, "--notify-url", "https://x.invalid" + url)
    text = unit_for(home, argv)
    unit = parsed(text)
    assert unit.exec_start() == argv
    assert unit.option("--notify-url") == "https://x.invalid" + url
    assert unit.port() == 8767
    got = existing_binding(InstalledUnit(unit, (), {}), HOME)
    assert got.path == posixpath.normpath(home)
    assert got.source == "installed unit: LOOPX_CHAT_CODEX_HOME from loopx-chat.service"
    assert unit_for(home, argv) == text  # deterministic text


@pytest.mark.parametrize("home", ['/home/me/Codex homes/"quoted" 100% $HOME ü', "/h"])
def test_systemd_analyze_accepts_what_is_written(tmp_path: Path, home: str) -> None:
    folder = tmp_path / "home" / ".config" / "systemd" / "user"
    folder.mkdir(parents=True)
    import sys

    argv = (sys.executable, "-m", "loopx_chat", "serve", "--port", "8767")
    (folder / SERVICE_UNIT).write_text(unit_for(home, argv))
    (folder / SOCKET_UNIT).write_text(render_socket(8767))
    verify_units(folder, SERVICE_UNIT, SOCKET_UNIT)


def test_systemd_analyze_is_a_real_check(tmp_path: Path) -> None:
    """The verifier fails on a unit it only warns about (an unknown key), so a pass means
    something."""
    folder = tmp_path / "home" / ".config" / "systemd" / "user"
    folder.mkdir(parents=True)
    (folder / SOCKET_UNIT).write_text(render_socket(8767) + "[Socket]\nListenStreem=1\n")
    with pytest.raises(AssertionError, match="Unknown key"):
        verify_units(folder, SOCKET_UNIT)


USER_LINES = """\
# my note: proxy for the office network
Environment=HTTPS_PROXY=http://proxy.invalid:3128 "MY_FLAG=a b"
Environment="LOOPX_CHAT_CODEX_HOME=/ignored" OTHER=1
Environment=CODEX_HOME=/stray
Nice=5
Restart=always
"""


def test_an_upgrade_keeps_every_line_the_user_added() -> None:
    old = unit_for("/h").replace("[Install]", USER_LINES.replace("\n", "\n", 1) + "\n[Install]", 1)
    old = old.replace("[Unit]\n", "[Unit]\nWants=network-online.target\n", 1)
    text, kept, dropped = merge_user_lines(SERVICE_UNIT, unit_for("/h"), parsed(old))
    unit = parsed(text)
    env = unit.environment()
    assert env["HTTPS_PROXY"] == "http://proxy.invalid:3128" and env["MY_FLAG"] == "a b"
    assert env["OTHER"] == "1" and env["LOOPX_CHAT_CODEX_HOME"] == "/h"
    assert "CODEX_HOME" not in env
    assert unit.values("Service", "Nice") == ["5"]
    assert unit.values("Service", "Restart") == ["always"]  # tunable: their value stays
    assert unit.values("Unit", "Wants") == ["network-online.target"]
    assert "# my note: proxy for the office network" in text
    assert {"Service.Nice", "Service.Restart", "Unit.Wants", "Environment.HTTPS_PROXY"} <= set(kept)
    assert dropped == ["Environment.CODEX_HOME"]
    again, _, _ = merge_user_lines(SERVICE_UNIT, unit_for("/h"), unit)
    assert again == text  # a second install changes nothing


def test_an_empty_environment_line_cannot_reset_the_binding() -> None:
    old = unit_for("/h").replace("[Install]", "[Service]\nEnvironment=\n\n[Install]")
    text, _, dropped = merge_user_lines(SERVICE_UNIT, unit_for("/h"), parsed(old))
    assert parsed(text).environment()["LOOPX_CHAT_CODEX_HOME"] == "/h"
    assert "Service.Environment=" in dropped


def test_from_a_foreign_unit_nothing_is_kept_and_each_line_is_named() -> None:
    foreign = (
        "[Unit]\nDescription=mine\n[Service]\nExecStart=/usr/bin/loopx-chat serve\n"
        "Environment=API=1\nNice=3\n[Install]\nWantedBy=default.target\n"
    )
    text, kept, dropped = merge_user_lines(SERVICE_UNIT, unit_for("/h"), parsed(foreign))
    assert text == unit_for("/h") and kept == []
    assert dropped == ["Environment.API", "Service.Nice"]


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("Key=1\n", "before any [Section]"),
        ("[Service]\nnot a setting\n", "not Key=Value"),
        ("[Service]\nExecStart=/x \\\n", "backslash"),
        ("[Service]\nExecStart=/x\x00\n", "NUL"),
        ("[Service]\nEnvironment=A=\x1b[31m\n", "control characters"),
    ],
)
def test_malformed_units_fail_closed(text: str, detail: str) -> None:
    with pytest.raises(ServiceUnitError) as info:
        parsed(text)
    assert info.value.error_code == "unit_malformed"
    assert detail in info.value.message and "/u/loopx-chat.service" in info.value.message


def test_continued_lines_and_comments_read_as_systemd_reads_them() -> None:
    unit = parsed(
        "[Service]\nExecStart=/usr/bin/loopx-chat \\\n# skipped\n  serve --port 9000\n"
        "; a comment\nEnvironment=LOOPX_CHAT_CODEX_HOME=%h/codex\n"
    )
    assert unit.exec_start() == ("/usr/bin/loopx-chat", "serve", "--port", "9000")
    assert existing_binding(InstalledUnit(unit, (), {}), HOME).path == "/home/me/codex"


def test_drop_ins_and_environment_files_decide_the_home_in_systemd_order() -> None:
    base = unit_for("/unit-home")
    over = "[Service]\nEnvironment=LOOPX_CHAT_CODEX_HOME=/dropin-home\n"
    got = existing_binding(installed(base, over), HOME)
    assert (got.path, got.source) == (
        "/dropin-home",
        "installed unit: LOOPX_CHAT_CODEX_HOME from 0.conf",
    )
    with_file = "[Service]\nEnvironmentFile=-/etc/x.env\nEnvironmentFile=/u/me.env\n"
    files = {"/u/me.env": "# mine\nLOOPX_CHAT_CODEX_HOME='/file-home'\n", "/etc/x.env": None}
    got = existing_binding(installed(base, over, with_file, files=files), HOME)
    assert got.path == "/file-home"  # environment files override Environment=
    reset = "[Service]\nEnvironment=\n"
    got = existing_binding(installed(base, reset), HOME)
    assert (got.path, got.source) == (
        "/home/me/.codex",
        "installed unit: no home variable, so $HOME/.codex",
    )


@pytest.mark.parametrize(
    ("text", "files"),
    [
        ("[Service]\nExecStart=/bin/sh -c 'loopx-chat serve'\n", {}),
        ("[Service]\nExecStart=/usr/bin/loopx-chat serve\nEnvironment=CODEX_HOME=/%i\n", {}),
        ("[Service]\nExecStart=$BIN serve\n", {}),
        ("[Service]\nExecStart=/usr/bin/loopx-chat serve\nEnvironmentFile=/gone.env\n", {}),
    ],
    ids=["shell", "specifier", "variable", "missing environment file"],
)
def test_a_home_that_cannot_be_read_back_is_refused(text: str, files: dict[str, str]) -> None:
    with pytest.raises(ServiceUnitError) as info:
        resolve_binding(
            explicit=None,
            installed=installed(text, files=files),
            ambient_codex_home="/ambient",
            ambient_sqlite_home=None,
            user_home=HOME,
        )
    assert info.value.error_code == "legacy_binding_ambiguous"
    # An explicit home settles it.
    got, before = resolve_binding(
        explicit="/explicit",
        installed=installed(text, files=files),
        ambient_codex_home=None,
        ambient_sqlite_home=None,
        user_home=HOME,
    )
    assert (got.path, before) == ("/explicit", None)


def test_an_explicit_home_a_drop_in_would_override_is_refused() -> None:
    unit = installed(unit_for("/h"), "[Service]\nEnvironment=LOOPX_CHAT_CODEX_HOME=/d\n")
    with pytest.raises(ServiceUnitError) as info:
        resolve_binding(
            explicit="/other",
            installed=unit,
            ambient_codex_home=None,
            ambient_sqlite_home=None,
            user_home=HOME,
        )
    assert info.value.error_code == "binding_overridden"
    assert "/u/loopx-chat.service.d/0.conf" in info.value.message


def test_precedence_without_a_unit() -> None:
    def resolve(ambient: str | None) -> UnitBinding:
        return resolve_binding(
            explicit=None,
            installed=None,
            ambient_codex_home=ambient,
            ambient_sqlite_home="~/sq",
            user_home=HOME,
        )[0]

    assert resolve("/amb") == UnitBinding("/amb", "ambient CODEX_HOME", "/home/me/sq")
    assert resolve(None) == UnitBinding("/home/me/.codex", "default", "/home/me/sq")
    with pytest.raises(ServiceUnitError) as info:
        resolve("relative/home")
    assert info.value.error_code == "codex_home_not_absolute"


def test_the_unit_offers_the_modes_the_service_takes() -> None:
    from loopx_chat.codex.turn_defaults import APPROVAL_POLICIES
    from loopx_chat.notify.dispatcher import MODES
    from loopx_chat.systemd.unit import APPROVAL_MODES, NOTIFY_MODES

    assert (APPROVAL_MODES, NOTIFY_MODES) == (APPROVAL_POLICIES, MODES)


def test_the_unit_owns_the_environment_the_plist_owns() -> None:
    from loopx_chat.launchagent import plist
    from loopx_chat.systemd import unit

    assert unit.OWN_ENV_KEYS == plist.OWN_ENV_KEYS
    assert unit.SERVICE_PROGRAMS == plist.SERVICE_PROGRAMS


@pytest.mark.parametrize("folder", ["a dir with spaces", "100% $HOME $$x", "ünï côdé"])
def test_systemd_itself_decodes_the_program_path_we_write(tmp_path: Path, folder: str) -> None:
    """An oracle that is not our parser: `verify` checks that ExecStart's program exists,
    after systemd's own unquoting, so a program in a folder full of systemd's specials passes
    only if systemd reads back exactly the path we wrote (a wrong one: "not executable")."""
    program = tmp_path / folder / "loopx-chat"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    units = tmp_path / "home" / ".config" / "systemd" / "user"
    units.mkdir(parents=True)
    (units / SERVICE_UNIT).write_text(unit_for("/h", (str(program), "serve")))
    (units / SOCKET_UNIT).write_text(render_socket(8767))
    verify_units(units, SERVICE_UNIT, SOCKET_UNIT)
    program.unlink()  # the control: the same unit, the program gone
    with pytest.raises(AssertionError, match="is not executable"):
        verify_units(units, SERVICE_UNIT, SOCKET_UNIT)


def test_what_cannot_be_read_back_is_never_guessed_nor_a_crash() -> None:
    unit = parsed(
        "[Service]\nExecStart=/usr/bin/loopx-chat serve --port $PORT\n"
        "Environment=LOOPX_CHAT_STATE_DIR=/s/%i\nEnvironment=LOOPX_CHAT_CODEX_BIN=/c\n"
    )
    assert (unit.port(), unit.option("--notify")) == (None, None)
    assert unit.environment() == {"LOOPX_CHAT_CODEX_BIN": "/c"}


@pytest.mark.parametrize(
    ("argv", "port"),
    [
        ("/usr/bin/python3.11 -m loopx_chat serve --port=9000", 9000),
        ("/opt/bin/loopx serve --port 65535", 65535),
        ("/usr/bin/loopx-chat serve --port 0", None),
        ("/usr/bin/loopx-chat serve --port 65536", None),
        ("/usr/bin/loopx-chat serve --port ²", None),
        ("/usr/bin/loopx-chat serve --port", None),
    ],
)
def test_the_service_argv_and_its_port_are_read_back(argv: str, port: int | None) -> None:
    unit = parsed(f"[Service]\nExecStart=-{argv}\nEnvironment=LOOPX_CHAT_CODEX_HOME=/h\n")
    assert unit.port() == port
    assert existing_binding(InstalledUnit(unit, (), {}), HOME).path == "/h"


@pytest.mark.parametrize(
    "argv",
    ["/usr/bin/python3 -m other serve", "/usr/bin/python3 loopx_chat serve", "/bin/loopx-chat"],
)
def test_what_does_not_start_serve_directly_is_ambiguous(argv: str) -> None:
    unit = parsed(f"[Service]\nExecStart={argv}\nEnvironment=LOOPX_CHAT_CODEX_HOME=/h\n")
    with pytest.raises(ServiceUnitError) as info:
        existing_binding(InstalledUnit(unit, (), {}), HOME)
    assert info.value.error_code == "legacy_binding_ambiguous"


def test_a_section_of_the_users_own_is_kept_whole() -> None:
    old = unit_for("/h") + "\n[X-Mine]\n; why\nNote=1\n"
    text, kept, _ = merge_user_lines(SERVICE_UNIT, unit_for("/h"), parsed(old))
    assert text.endswith("\n[X-Mine]\n# loopx-chat: kept from your unit\n; why\nNote=1\n")
    assert kept == ["X-Mine.Note"]
    assert merge_user_lines(SERVICE_UNIT, unit_for("/h"), parsed(text))[0] == text


def test_kept_lines_sit_at_the_end_of_their_section() -> None:
    old = unit_for("/h").replace("[Install]", "Nice=5\n\n[Install]")
    text, _, _ = merge_user_lines(SERVICE_UNIT, unit_for("/h"), parsed(old))
    service = text.split("[Service]\n", 1)[1].split("\n[Install]", 1)[0]
    assert service.endswith("LimitNOFILE=8192\n# loopx-chat: kept from your unit\nNice=5\n")


@pytest.mark.parametrize("bad", ["/a\x01b", "/a\nb"])
def test_a_value_systemd_cannot_carry_is_refused(bad: str) -> None:
    with pytest.raises(ServiceUnitError):
        unit_for(bad)
    with pytest.raises(ServiceUnitError) as info:
        render_service(UnitSpec(argv=ARGV, environment=(), working_directory=bad))
    assert info.value.error_code == "unit_malformed"
    with pytest.raises(ServiceUnitError):
        render_service(UnitSpec(argv=ARGV, environment=(), working_directory=" /lead"))


@pytest.mark.parametrize("folder", ['dir with "quotes"', "back\\slash", "it's"])
def test_a_program_path_systemd_refuses_is_refused_before_writing(folder: str) -> None:
    with pytest.raises(ServiceUnitError) as info:
        unit_for("/h", (f"/opt/{folder}/loopx-chat", "serve"))
    assert info.value.error_code == "program_path_unsupported"
