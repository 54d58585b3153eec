"""Map upstream app-server failures to loopx-chat error codes.

Every upstream error arrives as -32600, so classification is by message text. `UPSTREAM_TEXTS`
is the one table of every codex text the controller branches on, each with the codex version
it was observed on; nothing else in the package matches on upstream wording but the MCP tool
name of codex before 0.167.2 (`controller.elicitation.LEGACY_TOOL_MESSAGE`). Upstream text is
used only to pick a code: it is never copied into our messages, logs or state, because it can
quote config values or paths from the user's home.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopx_chat.errors import CodexError, Remedy

HOST_REMEDY = Remedy(
    summary="The Codex app-server refused a request from loopx-chat.",
    next_action="Check the Codex app-server host capability, then retry the session.",
)
CONFIG_REMEDY = Remedy(
    summary="Codex could not load its configuration for this home.",
    next_action="Fix config.toml in the bound Codex home (run `codex` there to see the error), "
    "then retry.",
)
BUSY_REMEDY = Remedy(
    summary="Another client is driving this Codex thread right now.",
    next_action="Wait for the other client to finish or close it; two clients never drive one "
    "thread at once.",
)
RESUME_REMEDY = Remedy(
    summary="Codex has no conversation with this thread id in the bound home.",
    next_action="Start loopx-chat with the Codex home this session was created in, or open a "
    "new session.",
)
CATALOG_REMEDY = Remedy(
    summary="Codex app-server could not load a compatible model catalog for loopx-chat.",
    next_action="Update the Codex CLI model catalog or remove its legacy override, then retry "
    "the session.",
)


@dataclass(frozen=True)
class UpstreamText:
    """One codex error text we branch on: every marker must appear (case-insensitive).

    `methods` limits the entry to those requests (empty: any). `observed_on` is the codex
    version the text was seen on; `example` is the text as that version printed it (paths
    shortened), kept so a reader can check the markers against it.
    """

    meaning: str  # legacy_catalog | resume_failed | thread_busy | codex_config_invalid
    markers: tuple[str, ...]
    observed_on: str
    example: str
    methods: tuple[str, ...] = ()

    def matches(self, method: str, lowered: str) -> bool:
        if self.methods and method not in self.methods:
            return False
        return all(marker in lowered for marker in self.markers)


# Order matters: the first entry that matches decides (a catalog error also starts with
# `failed to load configuration:`, and must be recognised as the curable case first).
UPSTREAM_TEXTS: tuple[UpstreamText, ...] = (
    UpstreamText(
        "legacy_catalog",
        ("model_catalog_json", "is missing both `base_instructions`"),
        observed_on="0.171.0",
        example="failed to load configuration: failed to parse model_catalog_json path `…` as "
        "JSON: model `gpt-6.2-sol` is missing both `base_instructions` and "
        "`model_messages.instructions_template` at line 1 column 26885",
    ),
    UpstreamText(
        "legacy_catalog",
        ("model_catalog_json", "missing field `base_instructions`"),
        observed_on="before 0.171.0",
        example="failed to load configuration: failed to parse model_catalog_json path `…` as "
        "JSON: missing field `base_instructions` at line 1 column 2",
    ),
    UpstreamText(
        "resume_failed",
        ("no rollout found",),
        observed_on="0.171.0",
        example="no rollout found for thread id 01a22603-0000-7000-8000-000000000000",
    ),
    UpstreamText(
        "resume_failed",
        ("invalid session id",),
        observed_on="0.171.0",
        example="invalid session id: invalid character: expected an optional prefix of "
        "`urn:uuid:` followed by [0-9a-fA-F-], found `n` at 1",
    ),
    UpstreamText(
        "thread_busy",
        ("already has an active writer",),
        observed_on="0.171.0",
        example="thread 01a22654-8805-7283-882f-6664d5224a44 already has an active writer",
    ),
    UpstreamText(
        # Another process holds the thread: our turn/start reaches a server that never loaded it.
        "thread_busy",
        ("thread not found",),
        observed_on="0.171.0",
        example="thread not found: 01a22654-8805-7283-882f-6664d5224a44",
        methods=("turn/start",),
    ),
    UpstreamText(
        "codex_config_invalid",
        ("failed to load configuration:",),
        observed_on="0.171.0",
        example="failed to load configuration: /x/config.toml:27:6: key with no value, "
        "expected `=`",
    ),
)


def upstream_meaning(method: str, message: str) -> str | None:
    """What a codex error text means to us (see `UPSTREAM_TEXTS`), or None when unknown."""
    lowered = message.lower()
    for entry in UPSTREAM_TEXTS:
        if entry.matches(method, lowered):
            return entry.meaning
    return None


def classify_rpc_error(method: str, message: str) -> CodexError:
    meaning = upstream_meaning(method, message)
    if meaning == "resume_failed":
        return CodexError(
            f"Codex could not restore the thread ({method})",
            error_code="resume_failed",
            remedy=RESUME_REMEDY,
        )
    if meaning == "thread_busy":
        return CodexError(
            "This Codex thread already has an active writer",
            error_code="thread_busy",
            remedy=BUSY_REMEDY,
        )
    if meaning in ("codex_config_invalid", "legacy_catalog"):
        # A legacy catalog reaches here only where no retry applies (it is a config error).
        return CodexError(
            f"Codex rejected its configuration on {method}",
            error_code="codex_config_invalid",
            remedy=CONFIG_REMEDY,
        )
    return CodexError(
        f"Codex app-server rejected {method}.", error_code="app_server_rejected", remedy=HOST_REMEDY
    )
