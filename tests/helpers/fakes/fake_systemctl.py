#!/usr/bin/env python3
"""A stateful fake `systemctl --user` for service tests on machines without a user manager.

Owns a tiny model of one user manager: the definition it loaded of each unit (the file's text
at the last `daemon-reload`, or at first use), which units are active (the service with a
pid) and which are enabled (the `*.wants/` symlinks it really creates in the unit folder, as
`enable` does). State lives in the JSON file `FAKE_SYSTEMCTL_STATE`; each call is appended to
`FAKE_SYSTEMCTL_LOG` as a JSON line, with the definition a start ran. It never runs a unit.

What each verb prints and exits with is what systemd 252 (Debian 12) does, from systemctl(1)
("EXIT STATUS": 3 "unit is not active", 4 "no such unit") and the messages of its sources
(src/systemctl/, src/shared/install.c):
- `is-active U`: the state word on stdout (`inactive` for a unit it does not know), exit 0
  when active, else 3.
- `is-enabled U`: `enabled` (exit 0) or `disabled` (exit 1); no unit file: "Failed to get
  unit file state for U: No such file or directory" on stderr, exit 1.
- `start U...`: silent, exit 0; no such unit: "Failed to start U: Unit U not found.", exit 5;
  a unit file changed since it was loaded starts the *loaded* definition, with systemd's
  warning to run daemon-reload; a service that fails (`FAKE_SYSTEMCTL_RUN=failed`): "Job for
  U failed because the control process exited with error code.", exit 1, state `failed`.
- `stop U...`: silent, exit 0; a unit never loaded: "Failed to stop U: Unit U not loaded.",
  exit 5 (the other units are still stopped).
- `daemon-reload`: silent, exit 0; every unit file is read again.
- `enable U...` / `disable U...`: "Created symlink L → T." / `Removed "L".` on stderr, exit 0;
  no unit file: "Failed to enable unit: Unit file U does not exist.", exit 1.
- `show U -p MainPID -p ExecMainStatus`: `Name=value` lines, exit 0 even for unknown units.
- `FAKE_SYSTEMCTL_NO_BUS=1`: every call prints "Failed to connect to bus: No medium found"
  and exits 1, as systemctl 252 does here in a container with no user manager (recorded).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def unit_dir() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.environ["HOME"], ".config")
    return Path(config) / "systemd" / "user"


def definition(name: str) -> str | None:
    """The unit's text with its drop-ins, as the manager would load it."""
    path = unit_dir() / name
    if not path.is_file():
        return None
    text = path.read_text()
    dropins = unit_dir() / f"{name}.d"
    if dropins.is_dir():
        for conf in sorted(p for p in dropins.iterdir() if p.name.endswith(".conf")):
            text += f"\n# drop-in {conf.name}\n" + conf.read_text()
    return text


def wanted_by(text: str) -> list[str]:
    section, targets = "", []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Install]" and line.startswith("WantedBy="):
            targets += line.partition("=")[2].split()
    return targets


def main(argv: list[str]) -> int:
    if os.environ.get("FAKE_SYSTEMCTL_NO_BUS") == "1":
        print("Failed to connect to bus: No medium found", file=sys.stderr)
        return 1
    if not argv or argv[0] != "--user":
        print("fake systemctl: only --user is modelled", file=sys.stderr)
        return 64
    argv = argv[1:]
    state_path = Path(os.environ["FAKE_SYSTEMCTL_STATE"])
    state: dict[str, Any] = (
        json.loads(state_path.read_text())
        if state_path.exists()
        else {"loaded": {}, "units": {}, "next_pid": 4242}
    )
    entry: dict[str, Any] = {"argv": argv}
    code = run(argv, state, entry)
    log = os.environ.get("FAKE_SYSTEMCTL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
    state_path.write_text(json.dumps(state))
    return code


def run(argv: list[str], state: dict[str, Any], entry: dict[str, Any]) -> int:
    verb, names = argv[0], [a for a in argv[1:] if not a.startswith("-")]
    loaded: dict[str, str] = state["loaded"]
    units: dict[str, Any] = state["units"]
    code = 0
    if verb == "daemon-reload":
        state["loaded"] = {n: t for n in loaded if (t := definition(n)) is not None}
    elif verb == "is-active":
        word = units.get(names[0], {}).get("active", "inactive")
        print(word)
        code = 0 if word == "active" else 3
    elif verb == "is-enabled":
        if definition(names[0]) is None:
            print(
                f"Failed to get unit file state for {names[0]}: No such file or directory",
                file=sys.stderr,
            )
            code = 1
        else:
            links = list(unit_dir().glob(f"*.wants/{names[0]}"))
            print("enabled" if links else "disabled")
            code = 0 if links else 1
    elif verb in ("enable", "disable"):
        for name in names:
            text = definition(name)
            if text is None:
                print(f"Failed to {verb} unit: Unit file {name} does not exist.", file=sys.stderr)
                return 1
            for target in wanted_by(text):
                link = unit_dir() / f"{target}.wants" / name
                if verb == "enable" and not link.is_symlink():
                    link.parent.mkdir(parents=True, exist_ok=True)
                    link.symlink_to(unit_dir() / name)
                    print(f"Created symlink {link} → {unit_dir() / name}.", file=sys.stderr)
                elif verb == "disable" and link.is_symlink():
                    link.unlink()
                    print(f'Removed "{link}".', file=sys.stderr)
    elif verb == "start":
        for name in names:
            if name not in loaded:
                text = definition(name)
                if text is None:
                    print(f"Failed to start {name}: Unit {name} not found.", file=sys.stderr)
                    return 5
                loaded[name] = text
            if loaded[name] != definition(name):
                print(
                    f"Warning: The unit file, source configuration file or drop-ins of {name} "
                    "changed on disk. Run 'systemctl --user daemon-reload' to reload units.",
                    file=sys.stderr,
                )
            unit = units.setdefault(name, {"active": "inactive"})
            entry.setdefault("ran", {})[name] = loaded[name]
            if unit["active"] == "active":
                continue
            if name.endswith(".service") and os.environ.get("FAKE_SYSTEMCTL_RUN") == "failed":
                unit.update(active="failed", pid=None, exit=1)
                print(
                    f"Job for {name} failed because the control process exited with error "
                    f'code.\nSee "systemctl --user status {name}" and "journalctl --user '
                    f'-xeu {name}" for details.',
                    file=sys.stderr,
                )
                code = 1
                continue
            pid = state["next_pid"] if name.endswith(".service") else None
            state["next_pid"] += 1
            unit.update(active="active", pid=pid, exit=None)
    elif verb == "stop":
        for name in names:
            if name not in loaded:
                print(f"Failed to stop {name}: Unit {name} not loaded.", file=sys.stderr)
                code = 5
                continue
            units.setdefault(name, {}).update(active="inactive", pid=None, exit=0)
    elif verb == "show":
        unit = units.get(names[0], {})
        print(f"MainPID={unit.get('pid') or 0}\nExecMainStatus={unit.get('exit') or 0}")
    else:
        print(f"fake systemctl: unsupported verb {verb!r}", file=sys.stderr)
        code = 64
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
