#!/usr/bin/env python3
"""A stateful fake `launchctl` for installer tests on machines without launchd.

Owns a tiny model of launchd for one user domain: which labels are loaded, running (with a
pid) or exited (with a last exit code). State lives in the JSON file named by
`FAKE_LAUNCHCTL_STATE`; every call is appended to `FAKE_LAUNCHCTL_LOG` as a JSON line.

Verbs: `print`, `bootout` (by label or by plist path), `bootstrap`, `enable`,
`kickstart [-k]`. Knobs:
- `FAKE_LAUNCHCTL_BOOTSTRAP_EIO=N`: the first N bootstraps fail with "Bootstrap failed: 5".
- `FAKE_LAUNCHCTL_RUN=running|exited`: what a bootstrapped job does (default running).
- `FAKE_LAUNCHCTL_BOOTOUT_LAG=N`: after a bootout, `print` still shows the job N times.
It never runs the job it loads and never evaluates plist contents.
"""

from __future__ import annotations

import json
import os
import plistlib
import sys
from pathlib import Path
from typing import Any


def load_state(path: Path) -> dict[str, Any]:
    if path.exists():
        return json.loads(path.read_text())
    return {"jobs": {}, "next_pid": 4242, "eio_used": 0, "lag": {}}


def main(argv: list[str]) -> int:
    state_path = Path(os.environ["FAKE_LAUNCHCTL_STATE"])
    log = os.environ.get("FAKE_LAUNCHCTL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"argv": argv}) + "\n")
    state = load_state(state_path)
    jobs: dict[str, Any] = state["jobs"]
    verb = argv[0] if argv else ""
    code = 0
    if verb == "print":
        label = argv[1].split("/", 2)[-1]
        lag = state["lag"].get(label, 0)
        job = jobs.get(label)
        if job is None and lag > 0:
            state["lag"][label] = lag - 1
            print(f"{argv[1]} = {{\n\tstate = SIGTERMed\n}}")
        elif job is None:
            print(f'Could not find service "{label}" in domain for user gui', file=sys.stderr)
            code = 113
        elif job["running"]:
            print(
                f"{argv[1]} = {{\n\tstate = running\n\tpid = {job['pid']}\n"
                "\tlast exit code = (never exited)\n}"
            )
        else:
            print(
                f"{argv[1]} = {{\n\tstate = not running\n\tlast exit code = {job['last_exit']}\n}}"
            )
    elif verb == "bootout":
        # `bootout gui/<uid>/<label>` or, as launchd also accepts, `bootout gui/<uid> <plist>`
        if len(argv) > 2:
            try:
                label = plistlib.loads(Path(argv[2]).read_bytes())["Label"]
            except (OSError, ValueError, KeyError, plistlib.InvalidFileException):
                label = ""
        else:
            label = argv[1].split("/", 2)[-1]
        if jobs.pop(label, None) is None:
            print("Boot-out failed: 3: No such process", file=sys.stderr)
            code = 3
        else:
            state["lag"][label] = int(os.environ.get("FAKE_LAUNCHCTL_BOOTOUT_LAG", "0"))
    elif verb == "enable":
        state.setdefault("enabled", []).append(argv[1])
    elif verb == "bootstrap":
        plist_path = Path(argv[2])
        data = plistlib.loads(plist_path.read_bytes())
        label = data["Label"]
        if state["eio_used"] < int(os.environ.get("FAKE_LAUNCHCTL_BOOTSTRAP_EIO", "0")):
            state["eio_used"] += 1
            print("Bootstrap failed: 5: Input/output error", file=sys.stderr)
            code = 5
        elif label in jobs:
            print("Bootstrap failed: 5: Input/output error", file=sys.stderr)
            code = 5
        else:
            running = os.environ.get("FAKE_LAUNCHCTL_RUN", "running") == "running"
            jobs[label] = {
                "plist": str(plist_path),
                "program_arguments": data.get("ProgramArguments"),
                "environment": data.get("EnvironmentVariables"),
                "running": running,
                "pid": state["next_pid"] if running else None,
                "last_exit": None if running else 78,
            }
            state["next_pid"] += 1
    elif verb == "kickstart":
        label = argv[-1].split("/", 2)[-1]
        job = jobs.get(label)
        if job is None:
            print(f'Could not find service "{label}"', file=sys.stderr)
            code = 113
        elif os.environ.get("FAKE_LAUNCHCTL_RUN", "running") == "running":
            job.update(running=True, pid=state["next_pid"], last_exit=None)
            state["next_pid"] += 1
        else:  # a job that exits at once is not running after a kickstart either
            job.update(running=False, pid=None, last_exit=78)
    else:
        print(f"fake launchctl: unsupported verb {verb!r}", file=sys.stderr)
        code = 64
    state_path.write_text(json.dumps(state))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
