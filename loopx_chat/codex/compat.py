"""What loopx-chat needs of a codex: the releases it was tested on and the protocol it uses.

Owns, as data:
  * `TESTED_RANGE`: the oldest and newest codex release this package was checked on, and the
    date of that check (the reference is shared/reference/codex-versions.md);
  * `PROTOCOL`: every JSON-RPC request loopx-chat sends, notification it sends or reads, and
    server request it answers, each with the features that need it (a test parses the
    package and fails for a method used that is not here);
and, as pure functions over a schema already read, which of those a codex lacks
(`missing_uses`) and where a version stands against the range (`range_position`).

It must never spawn, read files or touch the environment: `codex.compat_probe` runs the
binary and hands the parsed schema here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

UseKind = Literal["request", "client_notification", "notification", "server_request"]

# The schema file (`generate-json-schema --out DIR`) that lists the methods of each kind.
SCHEMA_FILES: Mapping[UseKind, str] = {
    "request": "ClientRequest.json",
    "client_notification": "ClientNotification.json",
    "notification": "ServerNotification.json",
    "server_request": "ServerRequest.json",
}


@dataclass(frozen=True)
class TestedRange:
    oldest: str
    newest: str
    checked_on: str  # the day every release in the range passed the demo and this table

    def to_dict(self) -> dict[str, str]:
        return {"oldest": self.oldest, "newest": self.newest, "checked_on": self.checked_on}


TESTED_RANGE = TestedRange(oldest="0.160.0", newest="0.171.0", checked_on="2026-12-02")


@dataclass(frozen=True)
class ProtocolUse:
    """One method loopx-chat uses; `params` are request fields it sends that must exist, and
    `experimental` says they exist only in the `--experimental` schema."""

    method: str
    kind: UseKind
    features: tuple[str, ...]
    params: tuple[str, ...] = ()
    experimental: bool = False


_CHAT = ("chat turns", "goal runs")
_APPROVALS = ("approvals",)

PROTOCOL: tuple[ProtocolUse, ...] = (
    # requests loopx-chat sends
    ProtocolUse("initialize", "request", ("everything",)),
    ProtocolUse(
        "thread/start",
        "request",
        ("chat turns",),
        ("cwd", "sandbox", "approvalPolicy"),
    ),
    ProtocolUse(
        "thread/resume",
        "request",
        _CHAT,
        ("threadId", "cwd", "sandbox", "approvalPolicy", "excludeTurns"),
    ),
    ProtocolUse("turn/start", "request", _CHAT, ("threadId", "input", "approvalPolicy")),
    ProtocolUse("turn/start", "request", ("plan mode", "goal runs"), ("collaborationMode",), True),
    ProtocolUse("turn/interrupt", "request", ("interrupt", "timeouts", "goal runs")),
    ProtocolUse("turn/steer", "request", ("decisions after the window",)),
    ProtocolUse("thread/read", "request", ("history",), ("threadId", "includeTurns")),
    ProtocolUse(
        "thread/turns/list",
        "request",
        ("goal runs",),
        ("threadId", "limit", "sortDirection", "itemsView"),
    ),
    ProtocolUse("thread/goal/get", "request", ("goal runs",)),
    ProtocolUse("thread/goal/set", "request", ("goal runs",), ("threadId", "status")),
    ProtocolUse("thread/goal/clear", "request", ("goal runs",)),
    ProtocolUse("initialized", "client_notification", ("everything",)),
    # notifications loopx-chat reads
    ProtocolUse("thread/status/changed", "notification", ("approvals", "timeouts")),
    ProtocolUse("thread/tokenUsage/updated", "notification", ("token counts", "goal runs")),
    ProtocolUse("item/agentMessage/delta", "notification", ("streamed replies",)),
    ProtocolUse("item/started", "notification", ("first-output timeout",)),
    ProtocolUse("item/completed", "notification", ("runaway guard",)),
    ProtocolUse("turn/started", "notification", ("goal runs",)),
    ProtocolUse("turn/completed", "notification", _CHAT),
    ProtocolUse("thread/goal/updated", "notification", ("goal runs",)),
    ProtocolUse("account/rateLimits/updated", "notification", ("quota",)),
    ProtocolUse("error", "notification", ("retry notices",)),
    # server requests loopx-chat answers
    ProtocolUse("item/commandExecution/requestApproval", "server_request", _APPROVALS),
    ProtocolUse("item/fileChange/requestApproval", "server_request", _APPROVALS),
    ProtocolUse("item/permissions/requestApproval", "server_request", _APPROVALS),
    ProtocolUse("item/tool/requestUserInput", "server_request", ("questions",)),
    ProtocolUse("mcpServer/elicitation/request", "server_request", ("MCP server requests",)),
)

USED_METHODS: frozenset[str] = frozenset(use.method for use in PROTOCOL)


@dataclass(frozen=True)
class SchemaSurface:
    """What one schema bundle offers: method names per kind, and each request's params."""

    methods: Mapping[UseKind, frozenset[str]]
    request_params: Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class MissingUse:
    method: str
    kind: UseKind
    features: tuple[str, ...]
    params: tuple[str, ...] = ()  # empty: the method itself is missing

    @property
    def name(self) -> str:
        return f"{self.method} ({', '.join(self.params)})" if self.params else self.method

    def to_dict(self) -> dict[str, object]:
        return {
            "method": self.method,
            "kind": self.kind,
            "params": list(self.params),
            "features": list(self.features),
        }


def surface_from_schema(documents: Mapping[UseKind, object]) -> SchemaSurface:
    """The methods (and request params) named by the `oneOf` of each kind's schema file."""
    methods: dict[UseKind, frozenset[str]] = {}
    params: dict[str, frozenset[str]] = {}
    for kind, doc in documents.items():
        names: set[str] = set()
        definitions = doc.get("definitions", {}) if isinstance(doc, dict) else {}
        variants = doc.get("oneOf", []) if isinstance(doc, dict) else []
        for variant in variants if isinstance(variants, list) else []:
            props = variant.get("properties", {}) if isinstance(variant, dict) else {}
            method = props.get("method", {}) if isinstance(props, dict) else {}
            found = _method_names(method)
            names.update(found)
            if kind == "request" and isinstance(definitions, dict):
                fields = _param_fields(props.get("params"), definitions)
                for name in found:
                    params[name] = fields
        methods[kind] = frozenset(names)
    return SchemaSurface(methods=methods, request_params=params)


def _method_names(method: object) -> list[str]:
    if not isinstance(method, dict):
        return []
    enum = method.get("enum")
    if isinstance(enum, list):
        return [m for m in enum if isinstance(m, str)]
    const = method.get("const")
    return [const] if isinstance(const, str) else []


def _param_fields(params: object, definitions: Mapping[str, object]) -> frozenset[str]:
    ref = params.get("$ref") if isinstance(params, dict) else None
    if not isinstance(ref, str):
        return frozenset()
    target = definitions.get(ref.rsplit("/", 1)[-1])
    props = target.get("properties") if isinstance(target, dict) else None
    return frozenset(props) if isinstance(props, dict) else frozenset()


def missing_uses(stable: SchemaSurface, experimental: SchemaSurface) -> tuple[MissingUse, ...]:
    """Each use the schemas lack: the method itself, or the params of it we send."""
    out: list[MissingUse] = []
    for use in PROTOCOL:
        surface = experimental if use.experimental else stable
        if use.method not in surface.methods.get(use.kind, frozenset()):
            if not any(m.method == use.method and not m.params for m in out):
                out.append(MissingUse(use.method, use.kind, use.features))
            continue
        if use.kind == "request" and use.params:
            have = surface.request_params.get(use.method, frozenset())
            lacking = tuple(p for p in use.params if p not in have)
            if lacking:
                out.append(MissingUse(use.method, use.kind, use.features, lacking))
    return tuple(out)


def features_lost(missing: Iterable[MissingUse]) -> tuple[str, ...]:
    """The features that need what is missing, in first-seen order."""
    seen: dict[str, None] = {}
    for item in missing:
        for feature in item.features:
            seen.setdefault(feature, None)
    return tuple(seen)


_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")

RangePosition = Literal["inside", "older", "newer", "unknown"]


def version_key(version: str) -> tuple[int, int, int] | None:
    match = _VERSION.match(version)
    if match is None:
        return None
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def range_position(version: str | None) -> RangePosition:
    """Where `version` stands against the tested range (a pre-release counts as its release)."""
    key = version_key(version) if version else None
    oldest, newest = version_key(TESTED_RANGE.oldest), version_key(TESTED_RANGE.newest)
    if key is None or oldest is None or newest is None:
        return "unknown"
    if key < oldest:
        return "older"
    if key > newest:
        return "newer"
    return "inside"
