"""Whether a Codex home can reach its model: which provider it names and whether it is signed in.

Owns the rule, from the home's parsed `config.toml`: the model provider (`model_provider`,
else codex's default `openai`); a provider that needs OpenAI sign-in (`openai`, or one whose
table says `requires_openai_auth = true`) is signed in when the home holds `auth.json`; one
with an `env_key` needs that variable set; any other (a local or mock provider, such as the
one `offline_config` writes for the demo and the tests) needs no sign-in.

It reads nothing but whether `auth.json` exists and whether the variable is set: never a
credential's value, never codex's keyring, and it never runs codex on the home (codex writes
scratch files there at start).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DEFAULT_PROVIDER = "openai"
# codex's built-in providers that need no OpenAI sign-in (local models).
LOCAL_PROVIDERS = frozenset({"oss", "ollama", "lmstudio"})
AUTH_FILE = "auth.json"


@dataclass(frozen=True)
class SignIn:
    provider: str
    needed: bool
    signed_in: bool | None  # None: cannot be told from the files (credentials in a keyring)
    how: str  # a few words: "auth.json", "OPENAI_API_KEY set", "not needed", ...

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sign_in_state(home: Path, config: Mapping[str, Any], environ: Mapping[str, str]) -> SignIn:
    """The home's provider and whether it is signed in for it (see the module docstring)."""
    raw = config.get("model_provider")
    provider = raw if isinstance(raw, str) and raw else DEFAULT_PROVIDER
    tables = config.get("model_providers")
    table = tables.get(provider) if isinstance(tables, Mapping) else None
    table = table if isinstance(table, Mapping) else None
    if table is not None:
        env_key = table.get("env_key")
        if isinstance(env_key, str) and env_key:
            present = bool(environ.get(env_key))
            return SignIn(provider, True, present, f"{env_key} {'set' if present else 'unset'}")
        needs_openai = table.get("requires_openai_auth") is True
    else:
        needs_openai = provider == DEFAULT_PROVIDER or provider not in LOCAL_PROVIDERS
    if not needs_openai:
        return SignIn(provider, False, None, "not needed")
    if (home / AUTH_FILE).is_file():
        return SignIn(provider, True, True, AUTH_FILE)
    store = config.get("cli_auth_credentials_store")
    if store in ("keyring", "auto"):
        return SignIn(provider, True, None, f"credentials in the {store} store")
    return SignIn(provider, True, False, f"no {AUTH_FILE}")
