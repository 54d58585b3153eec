"""The command line in a fresh interpreter, and which modules it loaded: for tests that pin
what a command imports (its start time is mostly its imports)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping

PROBE = (
    "import json, sys\n"
    "sys.argv = ['loopx-chat', *json.loads(sys.argv[1])]\n"
    "from loopx_chat.cli import main\n"
    "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
    "print(json.dumps([code, sorted(sys.modules)]), file=sys.stderr)\n"
)


def probe_modules(
    args: list[str], env: Mapping[str, str]
) -> tuple[subprocess.CompletedProcess[str], object, list[str]]:
    """Run `loopx-chat args`: the process, its exit code as click ended, the modules loaded."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    code, loaded = json.loads(done.stderr.strip().splitlines()[-1])
    return done, code, loaded
