"""A tiny stdio MCP server whose one tool asks its client (codex) for input: `elicitation/create`.

Run as `python tests/helpers/mcp_asking_server.py`, named in a codex home's config.toml as
`[mcp_servers.asker]`. It speaks newline-delimited JSON-RPC on stdin/stdout: `initialize`,
`tools/list` (one tool, `ask`), and `tools/call ask`, which sends `elicitation/create` (the
message and a requested schema of two fields, from the call's arguments) to its client, waits
for the answer, and returns it as the tool's text (`elicited: <json>`), so the model (the
mock) sees what the owner answered. It writes nothing to disk and prints nothing but protocol.
"""

from __future__ import annotations

import json
import sys
from typing import Any

PROTOCOL = "2025-06-18"
TOOL = {
    "name": "ask",
    "description": "Ask the user for a value.",
    "inputSchema": {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    },
}
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name"},
        "colour": {"type": "string", "enum": ["red", "green"], "title": "A colour"},
    },
    "required": ["name"],
}


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _read() -> dict[str, Any] | None:
    line = sys.stdin.readline()
    if not line:
        return None
    try:
        found = json.loads(line)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _elicit(message: str) -> Any:
    """Ask the client; every other message that arrives meanwhile is handled in turn."""
    _send(
        {
            "jsonrpc": "2.0",
            "id": "elicit-1",
            "method": "elicitation/create",
            "params": {"message": message, "requestedSchema": SCHEMA},
        }
    )
    while (incoming := _read()) is not None:
        if incoming.get("id") == "elicit-1" and "method" not in incoming:
            return incoming.get("result", incoming.get("error"))
        _handle(incoming)
    return None


def _handle(message: dict[str, Any]) -> None:
    method = message.get("method")
    ident = message.get("id")
    if ident is None:
        return  # a notification (initialized, cancelled): nothing to answer
    if method == "initialize":
        result: Any = {
            "protocolVersion": PROTOCOL,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "asker", "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        arguments = (message.get("params") or {}).get("arguments") or {}
        got = _elicit(str(arguments.get("message", "Tell me something")))
        result = {"content": [{"type": "text", "text": "elicited: " + json.dumps(got)}]}
    elif method == "ping":
        result = {}
    else:
        _send(
            {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no such method"}}
        )
        return
    _send({"jsonrpc": "2.0", "id": ident, "result": result})


def main() -> int:
    while (message := _read()) is not None:
        _handle(message)
    return 0


if __name__ == "__main__":
    sys.exit(main())
