"""Ask a codex binary what it is: found, runnable, its version and its own protocol schema.

Owns the one check of the codex loopx-chat will run (`check_codex`), for `home check` and
`serve`: find it (`binary.find_codex`), run `codex --version` and `codex app-server
generate-json-schema` (stable and `--experimental`, at once) in a scratch CODEX_HOME, and
compare with `compat.PROTOCOL`. The answer is cached in the owner's state dir per binary
(resolved path, mtime and size) and per protocol table, so a second check spawns nothing.

It must never run codex on the owner's home (codex writes scratch files there at start), keep
anything of the schema but the cached verdict, or put a path in `summary_line`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from loopx_chat.codex.app_server import child_environment
from loopx_chat.codex.binary import CodexBinary, find_codex, parse_version
from loopx_chat.codex.compat import (
    PROTOCOL,
    SCHEMA_FILES,
    TESTED_RANGE,
    USED_METHODS,
    MissingUse,
    RangePosition,
    SchemaSurface,
    UseKind,
    features_lost,
    missing_uses,
    range_position,
    surface_from_schema,
)
from loopx_chat.errors import CodexError, LoopxChatError, Remedy
from loopx_chat.state.private_files import PRIVATE_FILE_MODE, atomic_write_bytes, ensure_private_dir
from loopx_chat.state.safe_read import parse_json, read_regular

PROBE_TIMEOUT_SEC = 20.0
CACHE_VERSION = 1
# Where the verdicts live, under the state dir: one small file per binary.
CACHE_FOLDER = ("cache", "codex-check")

NOT_RUNNABLE_REMEDY = Remedy(
    summary="The codex loopx-chat would run does not start.",
    next_action=(
        "Reinstall the Codex CLI (npm install -g @openai/codex), or pass --codex-bin / set "
        "LOOPX_CHAT_CODEX_BIN to a codex that runs `codex --version`."
    ),
)
MISSING_REMEDY = Remedy(
    summary="This codex lacks protocol methods loopx-chat uses.",
    next_action=(
        f"Install a codex from the tested range ({TESTED_RANGE.oldest} to "
        f"{TESTED_RANGE.newest}): npm install -g @openai/codex@{TESTED_RANGE.newest}."
    ),
)


@dataclass(frozen=True)
class CodexCheck:
    """The verdict on one codex binary; `error_code` is None when loopx-chat can use it all."""

    found: bool
    runnable: bool
    version: str | None = None
    position: RangePosition = "unknown"
    schema_checked: bool = False
    missing: tuple[MissingUse, ...] = ()
    cached: bool = False
    error_code: str | None = None
    error: str | None = None
    remedy: Remedy | None = None
    warnings: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.error_code is None

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "found": self.found,
            "runnable": self.runnable,
            "version": self.version,
            "tested_range": TESTED_RANGE.to_dict(),
            "range": self.position,
            "schema_checked": self.schema_checked,
            "missing": [m.to_dict() for m in self.missing],
            "features_unavailable": list(features_lost(self.missing)),
            "cached": self.cached,
            "error_code": self.error_code,
            "error": self.error,
            "gate": self.remedy.to_dict() if self.remedy else None,
            "warnings": list(self.warnings),
        }


def check_codex(
    codex_bin: str | None, environ: Mapping[str, str], state_dir: Path | None
) -> CodexCheck:
    """Found, runnable, version and protocol of the codex `--codex-bin`/env/PATH names."""
    try:
        binary = find_codex(codex_bin, environ)
    except CodexError as exc:
        return CodexCheck(
            found=False,
            runnable=False,
            error_code=exc.error_code,
            error=exc.message,
            remedy=exc.remedy,
        )
    key = _binary_key(binary)
    cache = _cache_path(state_dir, binary) if state_dir is not None and key else None
    if cache is not None and key is not None:
        hit = _read_cache(cache, key)
        if hit is not None:
            return _verdict(*hit, cached=True)
    version, surfaces = _probe(binary, environ)
    if version is None:
        return CodexCheck(
            found=True,
            runnable=False,
            error_code="codex_not_runnable",
            error="The codex loopx-chat would run does not answer `codex --version`.",
            remedy=NOT_RUNNABLE_REMEDY,
        )
    missing = missing_uses(*surfaces) if surfaces is not None else None
    if cache is not None and key is not None and missing is not None:
        with contextlib.suppress(OSError, LoopxChatError):
            _write_cache(cache, key, version, missing)
    return _verdict(version, missing, cached=False)


def _verdict(version: str, missing: tuple[MissingUse, ...] | None, *, cached: bool) -> CodexCheck:
    position = range_position(version)
    warnings: list[str] = []
    if position in ("newer", "older"):
        checked = f", checked {TESTED_RANGE.checked_on}" if position == "newer" else ""
        warnings.append(
            f"codex {version} is {position} than loopx-chat was tested on "
            f"({TESTED_RANGE.oldest} to {TESTED_RANGE.newest}{checked})"
        )
    elif position == "unknown":
        warnings.append(f"codex reports a version loopx-chat cannot read ({version})")
    if missing is None:
        warnings.append("codex could not write its protocol schema, so it was not checked")
        return CodexCheck(True, True, version, position, warnings=tuple(warnings))
    if not missing:
        return CodexCheck(
            True, True, version, position, True, cached=cached, warnings=tuple(warnings)
        )
    names = ", ".join(m.name for m in missing)
    lost = ", ".join(features_lost(missing))
    return CodexCheck(
        found=True,
        runnable=True,
        version=version,
        position=position,
        schema_checked=True,
        missing=missing,
        cached=cached,
        error_code="codex_protocol_missing",
        error=f"codex {version} lacks {names}: {lost} will not work.",
        remedy=MISSING_REMEDY,
        warnings=tuple(warnings),
    )


def summary_line(check: CodexCheck) -> str:
    """One line for a log: version, range and protocol verdict; never a path."""
    if not check.found:
        return "codex: not found"
    if not check.runnable:
        return "codex: does not run (`codex --version` failed)"
    tested = f"{TESTED_RANGE.oldest}-{TESTED_RANGE.newest}"
    line = f"codex {check.version}: {check.position} the tested range {tested}"
    if check.position in ("older", "newer"):
        line = f"codex {check.version}: {check.position} than the tested range {tested} (warning)"
    if not check.schema_checked:
        return line + "; protocol not checked"
    if not check.missing:
        return line + f"; all {len(USED_METHODS)} methods loopx-chat uses are in its schema"
    lost = ", ".join(features_lost(check.missing))
    return line + f"; missing {', '.join(m.name for m in check.missing)} (breaks: {lost})"


# -- running the binary --------------------------------------------------------------------


def _probe(
    binary: CodexBinary, environ: Mapping[str, str]
) -> tuple[str | None, tuple[SchemaSurface, SchemaSurface] | None]:
    """(version, (stable, experimental) surfaces) from the binary, in a scratch home."""
    scratch = Path(tempfile.mkdtemp(prefix="loopx-chat-codex-check-"))
    try:
        env = child_environment(environ, scratch / "home")
        (scratch / "home").mkdir()
        runs = {
            "version": [str(binary.path), "--version"],
            "stable": [str(binary.path), "app-server", "generate-json-schema", "--out"],
            "experimental": [
                str(binary.path),
                "app-server",
                "generate-json-schema",
                "--experimental",
                "--out",
            ],
        }
        procs: dict[str, subprocess.Popen[bytes]] = {}
        for name, argv in runs.items():
            if name != "version":
                argv = [*argv, str(scratch / name)]
            try:
                procs[name] = subprocess.Popen(
                    argv,
                    env=env,
                    cwd=scratch,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
            except OSError:
                break
        results: dict[str, tuple[int | None, bytes]] = {}
        for name, proc in procs.items():
            try:
                out, _ = proc.communicate(timeout=PROBE_TIMEOUT_SEC)
                results[name] = (proc.returncode, out)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                results[name] = (None, b"")
        code, out = results.get("version", (None, b""))
        version = parse_version(out.decode("utf-8", "replace")) if code == 0 else None
        if version is None:
            return None, None
        surfaces = []
        for name in ("stable", "experimental"):
            if results.get(name, (None, b""))[0] != 0:
                return version, None
            surface = _read_surface(scratch / name)
            if surface is None:
                return version, None
            surfaces.append(surface)
        return version, (surfaces[0], surfaces[1])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _read_surface(folder: Path) -> SchemaSurface | None:
    documents: dict[UseKind, object] = {}
    for kind, name in SCHEMA_FILES.items():
        try:
            documents[kind] = json.loads((folder / name).read_bytes())
        except (OSError, ValueError):
            return None
    return surface_from_schema(documents)


# -- the cache -------------------------------------------------------------------------------


def _table_digest() -> str:
    rows = [[u.method, u.kind, list(u.params), u.experimental] for u in PROTOCOL]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


def _binary_key(binary: CodexBinary) -> dict[str, object] | None:
    try:
        st = os.stat(binary.path)
    except OSError:
        return None
    return {
        "path": str(binary.path),
        "mtime_ns": st.st_mtime_ns,
        "size": st.st_size,
        "table": _table_digest(),
        "cache_version": CACHE_VERSION,
    }


def _cache_path(state_dir: Path, binary: CodexBinary) -> Path:
    name = hashlib.sha256(str(binary.path).encode()).hexdigest()[:16]
    return state_dir.joinpath(*CACHE_FOLDER, f"{name}.json")


def _read_cache(path: Path, key: Mapping[str, object]) -> tuple[str, tuple[MissingUse, ...]] | None:
    try:
        doc = parse_json(read_regular(path))
    except (OSError, LoopxChatError, ValueError):  # JsonRefused is a ValueError
        return None
    if not isinstance(doc, dict) or doc.get("key") != dict(key):
        return None
    version = doc.get("version")
    rows = doc.get("missing")
    if not isinstance(version, str) or not isinstance(rows, list):
        return None
    missing = []
    for row in rows:
        if not isinstance(row, dict):
            return None
        missing.append(
            MissingUse(
                method=str(row.get("method")),
                kind=row.get("kind"),  # type: ignore[arg-type]
                features=tuple(str(f) for f in row.get("features") or ()),
                params=tuple(str(p) for p in row.get("params") or ()),
            )
        )
    return version, tuple(missing)


def _write_cache(
    path: Path, key: Mapping[str, object], version: str, missing: tuple[MissingUse, ...]
) -> None:
    state_root = path.parents[len(CACHE_FOLDER)]
    ensure_private_dir(path.parent, within=state_root)
    doc = {"key": dict(key), "version": version, "missing": [m.to_dict() for m in missing]}
    atomic_write_bytes(
        path, json.dumps(doc, sort_keys=True).encode(), mode=PRIVATE_FILE_MODE, durable=False
    )
