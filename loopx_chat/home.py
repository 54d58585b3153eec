"""Resolve the Codex home a controller is bound to.

Owns the one precedence rule: `LOOPX_CHAT_CODEX_HOME`, then `CODEX_HOME`, then `~/.codex`
(an empty value counts as unset; a relative value resolves against the given cwd), and where
the home's SQLite files live (`sqlite_home` in `<home>/config.toml`, then `CODEX_SQLITE_HOME`,
then the home itself), because a Codex home is really two places.

It reads the environment only through the mapping it is given and never mutates
`os.environ`. Callers resolve once at startup and pass the record on; nothing re-reads the
environment for the home later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

HomeSource = Literal["LOOPX_CHAT_CODEX_HOME", "CODEX_HOME", "default"]
SqliteSource = Literal["config", "CODEX_SQLITE_HOME", "home"]

HOME_ENV_PRECEDENCE: tuple[HomeSource, ...] = ("LOOPX_CHAT_CODEX_HOME", "CODEX_HOME")


@dataclass(frozen=True)
class CodexHomeBinding:
    """The Codex home a controller pins for its whole life."""

    path: Path
    source: HomeSource
    sqlite_home: Path
    sqlite_source: SqliteSource
    # Set when config.toml exists but cannot be read as TOML; the sqlite home then falls
    # back to the environment/home, and `home check` reports it.
    config_error: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "source": self.source,
            "sqlite_home": str(self.sqlite_home),
            "sqlite_source": self.sqlite_source,
            "config_error": self.config_error,
        }


def _user_home(environ: Mapping[str, str]) -> Path:
    home = environ.get("HOME")
    return Path(home) if home else Path.home()


def _absolute(raw: str, *, base: Path, environ: Mapping[str, str]) -> Path:
    if raw == "~" or raw.startswith("~/"):
        raw = str(_user_home(environ)) + raw[1:]
    path = Path(raw)
    if not path.is_absolute():
        path = base / path
    # strict=False: a home that does not exist yet still has a well-defined identity.
    return path.resolve(strict=False)


def resolve_home_path(environ: Mapping[str, str], cwd: Path) -> tuple[Path, HomeSource]:
    """The home alone and where it came from: what names it (`resolve_codex_home` without
    the sqlite home, so no config.toml is read or parsed)."""
    for name in HOME_ENV_PRECEDENCE:
        value = environ.get(name, "")
        if value:
            return _absolute(value, base=cwd, environ=environ), name
    return _absolute("~/.codex", base=cwd, environ=environ), "default"


def resolve_codex_home(environ: Mapping[str, str], cwd: Path) -> CodexHomeBinding:
    """Resolve the home (and its sqlite home) from `environ`, relative values against `cwd`."""
    home, source = resolve_home_path(environ, cwd)
    sqlite_home, sqlite_source, config_error = _resolve_sqlite_home(home, environ, cwd)
    return CodexHomeBinding(
        path=home,
        source=source,
        sqlite_home=sqlite_home,
        sqlite_source=sqlite_source,
        config_error=config_error,
    )


def _resolve_sqlite_home(
    home: Path, environ: Mapping[str, str], cwd: Path
) -> tuple[Path, SqliteSource, str | None]:
    configured, config_error = read_config_sqlite_home(home / "config.toml")
    if configured:
        # Codex resolves a relative sqlite_home against the home that holds the config.
        return _absolute(configured, base=home, environ=environ), "config", None
    env_value = environ.get("CODEX_SQLITE_HOME", "")
    if env_value:
        return _absolute(env_value, base=cwd, environ=environ), "CODEX_SQLITE_HOME", config_error
    return home, "home", config_error


def read_config_sqlite_home(config_path: Path) -> tuple[str | None, str | None]:
    """Return (`sqlite_home` value or None, error description or None) for a config.toml."""
    try:
        data = config_path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"config.toml unreadable ({exc.strerror or type(exc).__name__})"
    import tomllib  # only a home with a config.toml pays for the TOML parser

    try:
        parsed = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return None, f"config.toml does not parse: {exc}"
    value = parsed.get("sqlite_home")
    if isinstance(value, str) and value:
        return value, None
    return None, None


def home_key(codex_home: Path) -> str:
    """A short, stable, path-free name for a home: its locks, index and markers use it."""
    import hashlib  # loading OpenSSL costs a few ms: only commands that name a lock pay it

    return hashlib.sha256(str(codex_home).encode()).hexdigest()[:16]
