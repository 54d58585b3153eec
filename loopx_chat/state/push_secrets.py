"""The push channels' secrets for a service that launchd or systemd starts: `push-secrets.json`.

A service the service manager starts does not see the owner's shell, so `launchagent
install` / `service install` keep the secrets the owner's environment held at install time
(only the variables of `state/push_options.SECRET_NAMES` that the chosen channels use) in one
0600 file of the 0700 state dir, written atomically; `serve` takes each variable from its
environment first, then from this file. The file is read only if it is a regular file of
this user that nobody else can read (`state_unsafe` / `foreign_owner` otherwise, never
trusted); it is never world-readable, and no value is ever put on argv, in the plist or the
unit, in a log, an error or `status`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from loopx_chat.errors import Remedy, StateError, UsageError
from loopx_chat.state.push_options import SECRET_NAMES, PushPlan

SECRETS_FILE = "push-secrets.json"
SECRETS_SCHEMA = "loopx_chat_push_secrets_v1"
_LIMIT = 64 << 10


def _path(state_dir: Path) -> Path:
    return state_dir / SECRETS_FILE


def load(state_dir: Path) -> dict[str, str]:
    """The kept secrets by variable name; {} when there is no file. A file that is not this
    user's private regular file is refused, and so is one that is not ours."""
    from loopx_chat.state.service_runtime import read_private

    path = _path(state_dir)
    try:
        raw = read_private(path, _LIMIT)
    except ValueError as exc:
        raise StateError(
            f"the push secrets file is not safe to use: {exc}",
            error_code="state_unsafe",
            remedy=Remedy(
                summary="loopx-chat will not use a secret another user may have read.",
                next_action=f"Delete {path}, rotate the secrets it held, and run "
                "`loopx-chat service install` again with them in your environment.",
            ),
        ) from None
    if raw is None:
        return {}
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        doc = None
    if not isinstance(doc, dict) or doc.get("schema_version") != SECRETS_SCHEMA:
        raise StateError(
            f"{path} is not a push secrets file; move it aside and install again",
            error_code="state_corrupt",
        )
    values = doc.get("env")
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if k in SECRET_NAMES and isinstance(v, str) and v}


def save(state_dir: Path, values: Mapping[str, str]) -> None:
    """Replace the file with these secrets (0600, atomic); no file when there are none."""
    from loopx_chat.state.private_files import (
        PRIVATE_FILE_MODE,
        atomic_write_bytes,
        ensure_private_dir,
        state_write,
    )

    path = _path(state_dir)
    kept = {k: v for k, v in sorted(values.items()) if k in SECRET_NAMES and v}
    with state_write(state_dir):
        ensure_private_dir(state_dir)
    with state_write(path):
        if not kept:
            path.unlink(missing_ok=True)
            return
        doc = {"schema_version": SECRETS_SCHEMA, "env": kept}
        atomic_write_bytes(path, (json.dumps(doc) + "\n").encode(), mode=PRIVATE_FILE_MODE)


def keep_for_service(
    state_dir: Path,
    environ: Mapping[str, str],
    required: Iterable[str],
    optional: Iterable[str] = (),
) -> dict[str, str]:
    """At install: the secrets the chosen channels need, from `environ` first, then from the
    file an earlier install wrote; `usage_error` naming the first variable found in neither
    (the file is then left as it was). The file is rewritten to hold exactly these."""
    kept = load(state_dir)
    chosen: dict[str, str] = {}
    for name in required:
        value = environ.get(name, "").strip() or kept.get(name, "")
        if not value:
            raise UsageError(
                f"the service's push needs {name}: set it in this shell when you install "
                "(it is kept in the state dir, 0600; never in the plist or unit)",
                error_code="usage_error",
            )
        chosen[name] = value
    for name in optional:
        value = environ.get(name, "").strip() or kept.get(name, "")
        if value:
            chosen[name] = value
    if chosen != kept:
        save(state_dir, chosen)
    return chosen


def with_kept_secrets(environ: Mapping[str, str], state_dir: Path) -> dict[str, str]:
    """`serve`'s environment with each push secret it lacks taken from the kept file."""
    merged = dict(environ)
    missing = [name for name in SECRET_NAMES if not environ.get(name, "").strip()]
    if missing:
        kept = load(state_dir)
        merged.update({name: kept[name] for name in missing if name in kept})
    return merged


# What the CLI checks of a plan and the secrets it will run with (their shapes, the ntfy
# URL) before an install keeps them: the service managers' code cannot import `notify/`.
PushCheck = Callable[[PushPlan, Mapping[str, str]], None]


def keep_push_secrets(
    state_dir: Path,
    plan: PushPlan,
    environ: Mapping[str, str],
    check: PushCheck | None = None,
    *,
    in_definition: Mapping[str, str] = {},
) -> list[str]:
    """An install's push secrets: `environ` first, then a secret the installed plist or unit
    itself held (`in_definition`: the new one never does), then the kept file; checked, then
    kept (before launchd or systemd sees anything). No channel: the file is removed. The
    notes say which secrets moved out of the old definition (names only)."""
    found = {k: v for k, v in in_definition.items() if k in SECRET_NAMES and v}
    given = {**found, **{k: v for k, v in environ.items() if v.strip()}}
    merged = with_kept_secrets(given, state_dir) if plan.argv() else given
    if check is not None:
        check(plan, merged)
    kept = keep_for_service(state_dir, merged, plan.required_secrets, plan.optional_secrets)
    return [
        (
            f"{name} moved out of the service's definition into {_path(state_dir)} (0600)"
            if name in kept
            else f"{name} removed from the service's definition (no channel uses it)"
        )
        + "; the backup of the previous definition still holds it: delete that backup"
        for name in sorted(found)
    ]
