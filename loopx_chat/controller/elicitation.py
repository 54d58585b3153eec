"""What an MCP server asks the owner through codex (`mcpServer/elicitation/request`). Pure.

Owns the three shapes of one elicitation, as codex 0.171.0 sends and takes it
(`McpServerElicitationRequestParams` / `...Response` in `codex app-server
generate-json-schema`): the compact facts a host gate records (the server's name if it is a
plain word, the number of fields asked, and for codex's own "may this MCP tool run?"
request the tool's name: never the message, a field's title, a tool argument or a URL), the
live details the owner sees while deciding (the message, each field with its type, options
and whether it is required, the tool's arguments, a URL), and the answer:
`{action: accept, content}` / `{action: decline}` / `{action: cancel}`, the content's values
turned into the types the requested schema names.

It never stores or logs anything and never decides: an answer it cannot type is a
`usage_error` for the owner to correct.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from loopx_chat.errors import UsageError

METHOD = "mcpServer/elicitation/request"
MAX_FIELDS = 20
_PLAIN = re.compile(r"[A-Za-z0-9._+-]{1,40}")
# Codex before 0.167.2 names the tool of an MCP tool approval only in its message (no
# `_meta.tool_name`), as `Allow the asker MCP server to run tool "ask"?` (seen on 0.160.0).
# The one codex text matched outside `codex.errors_map`: only a plain tool name is taken,
# and only when the server named there is the request's own.
LEGACY_TOOL_MESSAGE = re.compile(
    r'Allow the (?P<server>\S+) MCP server to run tool "(?P<tool>[^"]+)"\?'
)


def _plain(value: object, fallback: str) -> str:
    return value if isinstance(value, str) and _PLAIN.fullmatch(value) else fallback


def _meta(params: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = params.get("_meta")
    return meta if isinstance(meta, Mapping) else {}


def is_tool_approval(params: Mapping[str, Any]) -> bool:
    """Codex's own request to let an MCP tool run, phrased as an elicitation."""
    return _meta(params).get("codex_approval_kind") == "mcp_tool_call"


def _properties(params: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    schema = params.get("requestedSchema")
    found = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(found, Mapping):
        return {}
    fields = {str(k): v for k, v in found.items() if isinstance(v, Mapping)}
    return dict(list(fields.items())[:MAX_FIELDS])


def _required(params: Mapping[str, Any]) -> set[str]:
    schema = params.get("requestedSchema")
    found = schema.get("required") if isinstance(schema, Mapping) else None
    return {str(r) for r in found} if isinstance(found, list) else set()


def field_ids(params: Mapping[str, Any]) -> list[str]:
    return list(_properties(params))


def facts(params: Mapping[str, Any]) -> dict[str, Any]:
    """The compact part of a host gate for an elicitation (see the module docstring)."""
    found: dict[str, Any] = {
        "server": _plain(params.get("serverName"), "an MCP server"),
        "fields": len(_properties(params)),
        "mode": _plain(params.get("mode"), "form"),
    }
    if is_tool_approval(params):
        found["tool"] = _plain(_meta(params).get("tool_name") or _legacy_tool(params), "a tool")
    return found


def _legacy_tool(params: Mapping[str, Any]) -> str | None:
    message = params.get("message")
    match = LEGACY_TOOL_MESSAGE.fullmatch(message) if isinstance(message, str) else None
    if match is None or match["server"] != params.get("serverName"):
        return None
    return match["tool"]


def summary(host: Mapping[str, Any]) -> str:
    server = host.get("server", "an MCP server")
    if host.get("tool"):
        return f"Codex asks to run the tool `{host['tool']}` of the MCP server `{server}`"
    count = int(host.get("fields", 0))
    return f"The MCP server `{server}` asks for input ({count} field{'' if count == 1 else 's'})"


def _options(spec: Mapping[str, Any]) -> list[str]:
    if isinstance(spec.get("enum"), list):
        return [str(o) for o in spec["enum"]]
    for key in ("oneOf", "anyOf"):
        if isinstance(spec.get(key), list):
            return [str(o.get("const")) for o in spec[key] if isinstance(o, Mapping)]
    items = spec.get("items")
    return _options(items) if isinstance(items, Mapping) else []


def details(params: Mapping[str, Any]) -> dict[str, Any]:
    """What the owner sees while deciding; memory only."""
    required = _required(params)
    shown: dict[str, Any] = {
        "kind": "elicitation",
        "server": str(params.get("serverName", "")),
        "message": str(params.get("message", "")),
        "tool_approval": is_tool_approval(params),
        "fields": [
            {
                "id": name,
                "title": str(spec.get("title") or name),
                "description": str(spec.get("description") or ""),
                "type": str(spec.get("type", "string")),
                "options": _options(spec),
                "required": name in required,
            }
            for name, spec in _properties(params).items()
        ],
    }
    if isinstance(params.get("url"), str):
        shown["url"] = params["url"]
    display = _meta(params).get("tool_params_display")
    if isinstance(display, list):
        shown["tool_params"] = [
            {"name": str(p.get("display_name") or p.get("name", "")), "value": str(p.get("value"))}
            for p in display
            if isinstance(p, Mapping)
        ]
    return shown


def _typed(name: str, spec: Mapping[str, Any], text: str) -> Any:
    kind = spec.get("type")
    try:
        if kind == "boolean":
            if text.strip().lower() not in ("true", "false", "yes", "no"):
                raise ValueError
            return text.strip().lower() in ("true", "yes")
        if kind == "integer":
            return int(text.strip())
        if kind == "number":
            return float(text.strip())
    except ValueError:
        raise UsageError(
            f"the answer for {name!r} must be a {kind}", error_code="input_invalid"
        ) from None
    if kind == "array":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


def reply(params: Mapping[str, Any], decision: str, answers: Mapping[str, str]) -> dict[str, Any]:
    """The JSON-RPC result codex takes: accept (with the typed content), decline or cancel."""
    if decision == "cancel":
        return {"action": "cancel"}
    if decision not in ("approve", "answer", "amend"):
        return {"action": "decline"}
    fields = _properties(params)
    missing = sorted(r for r in _required(params) if r in fields and not answers.get(r))
    if missing:
        raise UsageError(
            f"an answer is required for: {', '.join(missing)}", error_code="answer_missing"
        )
    unknown = sorted(name for name in answers if name not in fields)
    if unknown:  # a request with no fields (or a mistyped name) takes none of these
        raise UsageError(
            f"the MCP server asked for no field named {', '.join(unknown)}",
            error_code="unknown_question_id",
        )
    content = {name: _typed(name, fields[name], text) for name, text in answers.items() if text}
    return {"action": "accept", "content": content}
