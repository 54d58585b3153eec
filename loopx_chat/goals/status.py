"""The attention queue across goals: projection core output, in the status vocabulary.

Owns the status document (`loopx_chat_status_v1`, contract version 2): its rows (built by
status_row.py, one per goal) in order, with the host's facts, the archive and what the owner
was shown. `collect_status` reads owner-local state through the stores and nothing else.
Everything it returns comes from the compact projection, so it carries no transcript text,
credentials, raw output or local paths.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from loopx_chat.errors import StateError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_facts import GoalFacts, facts_from_state
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.reconcile import reconcile_reason, staleness
from loopx_chat.goals.status_index import GoalEntry, StatusIndex
from loopx_chat.goals.status_row import goal_status, record_summary
from loopx_chat.state.session_store import SessionStore

if TYPE_CHECKING:
    from loopx_chat.codex.rollouts import ThreadFacts

STATUS_SCHEMA_VERSION = "loopx_chat_status_v1"
STATUS_CONTRACT_VERSION = 2
_SEVERITY_ORDER = {"high": 0, "action": 1, "watch": 2}


def status_document(goals: Iterable[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(goals, key=lambda g: (_SEVERITY_ORDER.get(g["severity"], 9), g["goal_id"]))
    return {
        "ok": True,
        "schema_version": STATUS_SCHEMA_VERSION,
        "contract_version": STATUS_CONTRACT_VERSION,
        "goal_count": len(ordered),
        "attention_queue": ordered,
    }


def goal_record_summary(facts: GoalFacts, records: GoalLedger) -> dict[str, Any]:
    """goal_state, human rewards and advisory proposals, as the first screen shows them, and
    the OpenViking adapter's `memory` section when the goal has a memory input."""
    from loopx_chat.goals.memory_input import memory_field  # see goal_status

    return record_summary(
        records.goal_state(facts.goal_id),
        records.current_rewards(facts.goal_id),
        records.proposals(facts.goal_id),
        memory_field(records, facts.goal_id),
    )


def session_start_gates(
    store: SessionStore, goals: GateStore, codex_home: str, goal_id: str
) -> tuple[list[str], list[str]]:
    """(a person's gates open for the goal, those its first screen shows as holding it)."""
    facts = facts_from_state(goal_id, store=store, goals=goals, codex_home=codex_home)
    first = goal_status(facts)["projection"].get("first_screen", {})
    open_ids = [g.gate_id for g in goals.gates(goal_id) if g.status == "pending" and g.blocking]
    shown = [
        str(g["gate_id"])
        for g in facts.gates
        if g.get("gate_id") in open_ids and g.get("status") == "pending"
    ]
    return open_ids, shown if first.get("user_action_required") else []


OWNER_SURFACES = ("cli_tty", "cli_owner", "page", "api_owner")


def record_owner_view(goals: GateStore, doc: dict[str, Any], surface: str) -> None:
    """An owner's view (the page in a browser, `status` on a terminal, an API call with
    `?viewer=owner`) saw these blockers: record the first sighting of each. Scripts and
    `--json` reads never call this, so they never stop the time-to-owner clock."""
    if surface not in OWNER_SURFACES:
        raise ValueError(f"not an owner surface: {surface}")
    refs = [
        (row["goal_id"], ref)
        for row in doc["attention_queue"]
        for ref in row.get("shown_blocker_refs", ())
    ]
    if not refs:
        return
    try:
        seen = goals.control.reported()
    except StateError as exc:
        doc["control_log_error"] = exc.error_code  # nothing recorded on an unreadable log
        return
    for goal_id, ref in refs:
        if ref not in seen["blockers"]:
            goals.control.record(
                "blocker_displayed", goal_id=goal_id, blocker_ref=ref, surface=surface
            )
            seen["blockers"].add(ref)


# Finished goals step aside: an archived goal is counted on the first screen, not shown or
# recomputed there (`status --all` and the API still list it). Each rule: why, whether the
# entry qualifies, and how long its files must have been quiet. No rule ever archives a goal
# that waits on the owner (`waits_on_owner`).
ARCHIVE_RULES: tuple[tuple[str, Callable[[GoalEntry], bool], int], ...] = (
    ("accepted", lambda e: e.finished, 24 * 3600),
    ("idle", lambda e: True, 30 * 24 * 3600),
)


def waits_on_owner(row: Mapping[str, Any]) -> bool:
    """A problem, an owner gate, a person to act, or high severity: never archived."""
    first = (row.get("projection") or {}).get("first_screen") or {}
    return (
        row.get("status") == "problem"
        or row.get("severity") == "high"
        or row.get("waiting_on") in ("user_or_controller", "owner")
        or bool(first.get("user_action_required"))
    )


def archive_reason(entry: GoalEntry, now_ns: int) -> str | None:
    """Why the goal steps aside from the first screen now, or None (pure)."""
    if waits_on_owner(entry.row) or entry.activity_ns < 0:
        return None
    quiet = (now_ns - entry.activity_ns) / 1e9
    for reason, applies, after in ARCHIVE_RULES:
        if quiet >= after and applies(entry):
            return reason
    return None


def collect_status(
    store: SessionStore,
    goals: GateStore,
    codex_home: str,
    goal_id: str | None = None,
    *,
    surface: str | None = None,
    host: Mapping[str, ThreadFacts] | None = None,
    index: StatusIndex | None = None,
    include_archived: bool = False,
    now_ns: int | None = None,
) -> dict[str, Any]:
    """The status document; with `surface`, record stale projections detected there.

    Each goal's row comes from `index` (folded again only when its files changed; a fresh
    index folds every goal). Each row names the blockers its first screen shows
    (`shown_blocker_refs`); whether an owner saw them is recorded separately
    (`record_owner_view`), by the surfaces that know. With `host` (thread facts from the
    rollouts), each goal also says whether its projection is stale, how far behind, and
    why host and goal disagree (`reconcile_reason`).

    Without `goal_id`, finished goals (`ARCHIVE_RULES`) go to `archive`: counted, and
    listed only with `include_archived`.

    The control-event log only feeds the metrics: when it cannot be read, status still
    answers, records nothing new (it could not tell what is new), and names the error in
    `control_log_error`; `loopx-chat metrics` reports the same error.
    """
    if index is None:
        index = StatusIndex(store, goals, codex_home)
    index.refresh(only=goal_id)
    entries = [index.entries[goal_id]] if goal_id else list(index.entries.values())
    doc = assemble_status(
        entries,
        host,
        archive_now_ns=None if goal_id else (time.time_ns() if now_ns is None else now_ns),
        include_archived=include_archived,
    )
    doc["control_log_error"] = None
    # Sessions that cannot be read and that no event names with a goal: listed on their own.
    doc["unreadable_records"] = index.unreadable_records()
    if surface is not None and host is not None:
        note_stale(goals, doc, {e.goal_id: e.stale[2] for e in entries if e.stale is not None})
    return doc


def host_part(entry: GoalEntry, host: Mapping[str, ThreadFacts]) -> dict[str, Any]:
    """The row's host fields: how far the host is ahead, and why they disagree."""
    assert entry.stale is not None
    behind = staleness(*entry.stale, host)
    return {
        "host": behind.to_dict(),
        "reconcile_reason": reconcile_reason(
            behind, entry.row["projection"].get("first_screen", {})
        ),
    }


def assemble_status(
    entries: Iterable[GoalEntry],
    host: Mapping[str, ThreadFacts] | None,
    *,
    archive_now_ns: int | None,
    include_archived: bool,
) -> dict[str, Any]:
    """The document from the goals' entries (pure): each row with its host part, the
    finished ones in `archive` when `archive_now_ns` is given."""
    active: list[dict[str, Any]] = []
    archived: list[dict[str, Any]] = []
    for entry in entries:
        row = entry.row
        if host is not None and entry.stale is not None:
            row = {**row, **host_part(entry, host)}
        reason = None if archive_now_ns is None else archive_reason(entry, archive_now_ns)
        if reason is None:
            active.append(row)
        else:
            archived.append({**row, "archived_because": reason})
    doc = status_document(active)
    doc["archive"] = {
        "count": len(archived),
        **({"goals": status_document(archived)["attention_queue"]} if include_archived else {}),
    }
    return doc


def note_stale(
    goals: GateStore, doc: dict[str, Any], last_recorded: Mapping[str, str | None]
) -> None:
    """Record `stale_detected` once per goal position (behind by, our last record) that is
    stale now."""
    reported: dict[str, set[str]] | None = None
    for row in doc["attention_queue"]:
        host = row.get("host")
        if not host or not host["stale"]:
            continue
        if reported is None:
            try:
                reported = goals.control.reported()
            except StateError as exc:
                doc["control_log_error"] = exc.error_code
                return
        g = row["goal_id"]
        stale_key = f"{g}@{host['behind_turns']}:{last_recorded.get(g)}"
        if stale_key not in reported["stale"]:
            goals.control.record(
                "stale_detected",
                goal_id=g,
                lag_turns=host["behind_turns"],
                lag_seconds=host["behind_seconds"],
                position=stale_key,
            )
            reported["stale"].add(stale_key)


def record_displayed(goals: GateStore, shown: Mapping[str, Sequence[str]], surface: str) -> int:
    """Record `blocker_displayed` once per blocker a surface really showed (the page says
    which after the browser rendered them); returns how many were new."""
    try:
        seen = goals.control.reported()
    except StateError:
        return 0  # the log cannot be read: record nothing rather than double-count
    new = 0
    for goal_id, refs in shown.items():
        for ref in refs:
            if ref not in seen["blockers"]:
                goals.control.record(
                    "blocker_displayed", goal_id=goal_id, blocker_ref=ref, surface=surface
                )
                seen["blockers"].add(ref)
                new += 1
    return new
