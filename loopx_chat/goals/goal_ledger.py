"""The rest of a goal's control record: goal_state, lifecycle, human_reward, dreaming_proposal.

Owns `<state>/goals/<goal>/goal_state.jsonl`, `lifecycle.jsonl` (stop / resume), `rewards.jsonl`
and `proposals.jsonl` (goal_state includes the goal's own approval policy and Plan mode,
`approval_policy_unknown` for a policy codex does not have):
append-only, each entry with an id, `created_at`, `actor` and (for changes) the previous value,
so history reads back and survives restarts. Every record passes the projection core's key
classification before anything is written: a raw-material key (a transcript, a credential, a
path, raw output) refuses the whole record (`raw_material_refused`). Text is bounded and must
look public-safe. Nothing here talks to the host, and a dreaming proposal causes no action
until it is promoted into a handoff packet. Every check-then-write (a proposal's status, a
reward's predecessor) runs under the goal's lock, so parallel writers cannot both pass a check.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopx_chat.codex.turn_defaults import APPROVAL_POLICIES
from loopx_chat.errors import StateError, UsageError
from loopx_chat.goals.gate_store import (
    GATE_ACTORS,
    GateStore,
    Handoff,
    public_text,
    validate_goal_id,
)
from loopx_chat.state.jsonl import append_record, read_records

GOAL_STATE_SCHEMA = "loopx_chat_goal_state_v1"
REWARD_SCHEMA = "loopx_chat_human_reward_v1"
PROPOSAL_SCHEMA = "loopx_chat_dreaming_proposal_v1"
LIST_LIMIT = 12
ACTORS = (*GATE_ACTORS, "agent")

LIFECYCLE_SCHEMA = "loopx_chat_goal_lifecycle_v1"
GOAL_STATE_FIELDS = frozenset(
    {
        "objective",
        "non_goals",
        "authority_sources",
        "boundary",
        "token_budget",
        "acceptance",
        "stop_condition",
        "approval_policy",
        "plan",
        "resume_after_usage_limit",
    }
)


def approval_policy_field(value: object) -> str | None:
    """A goal's approval policy as stored, or `approval_policy_unknown` (nothing written)."""
    if value is None or value in APPROVAL_POLICIES:
        return value
    shown = value if isinstance(value, str) else type(value).__name__
    raise UsageError(
        f"approval policy {str(shown)[:40]!r} is not one of {', '.join(APPROVAL_POLICIES)}; "
        "nothing was written",
        error_code="approval_policy_unknown",
    )


def refuse_raw_keys(fields: Mapping[str, Any], what: str) -> None:
    """The projection core decides, by key name only, whether a record may be stored."""
    # The key rules load with the first record written, not with every reader of goals
    # (`status` on no goals needs none of the projection core).
    from loopx_chat.session_runtime.keys import KeyState, classify_session_runtime_key

    raw = sorted(
        str(k) for k in fields if classify_session_runtime_key(k).state == KeyState.RAW_MATERIAL
    )
    if raw:
        raise UsageError(
            f"{what} refused: {', '.join(raw)} {'is' if len(raw) == 1 else 'are'} raw material "
            "(transcripts, credentials, paths or raw output stay with the host); "
            "nothing was written",
            error_code="raw_material_refused",
        )


def _actor(actor: str) -> str:
    if actor not in ACTORS:
        raise UsageError(f"actor must be one of {', '.join(ACTORS)}", error_code="usage_error")
    return actor


def _text_list(values: object, what: str) -> list[str]:
    if not isinstance(values, list | tuple):  # a string is not a list of one-letter items
        raise UsageError(f"{what} must be a list of texts", error_code="input_invalid")
    if len(values) > LIST_LIMIT:
        raise UsageError(f"at most {LIST_LIMIT} {what}", error_code="usage_error")
    return [public_text(v, what) for v in values]


@dataclass(frozen=True)
class GoalState:
    goal_id: str
    objective: str
    non_goals: tuple[str, ...]
    authority_sources: tuple[str, ...]
    boundary: str | None
    token_budget: int | None
    record_id: str
    created_at: str
    actor: str
    acceptance: tuple[str, ...] = ()
    stop_condition: str | None = None
    # What codex may ask on this goal's turns and whether they run in Plan mode; None: not
    # set here (a command's flag, else the service's default, else `never` / no Plan).
    approval_policy: str | None = None
    plan: bool | None = None
    # Whether a run waits for the account's usage limit to reset and goes on by itself.
    resume_after_usage_limit: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "goal_id": self.goal_id,
            "objective": self.objective,
            "acceptance": list(self.acceptance),
            "stop_condition": self.stop_condition,
            "non_goals": list(self.non_goals),
            "authority_sources": list(self.authority_sources),
            "boundary": self.boundary,
            "token_budget": self.token_budget,
            "approval_policy": self.approval_policy,
            "plan": self.plan,
            "resume_after_usage_limit": self.resume_after_usage_limit,
            "record_id": self.record_id,
            "created_at": self.created_at,
            "actor": self.actor,
        }


def goal_state_from(goal_id: str, history: Sequence[Mapping[str, Any]]) -> GoalState | None:
    """The goal_state in force: the last record of `goal_state.jsonl` (pure)."""
    if not history:
        return None
    last = history[-1]
    return GoalState(
        goal_id=goal_id,
        objective=str(last["objective"]),
        non_goals=tuple(last.get("non_goals") or ()),
        authority_sources=tuple(last.get("authority_sources") or ()),
        boundary=last.get("boundary"),
        token_budget=last.get("token_budget"),
        record_id=str(last["record_id"]),
        created_at=str(last["created_at"]),
        actor=str(last["actor"]),
        acceptance=tuple(last.get("acceptance") or ()),
        stop_condition=last.get("stop_condition"),
        approval_policy=last.get("approval_policy"),
        plan=last.get("plan"),
        resume_after_usage_limit=last.get("resume_after_usage_limit"),
    )


def fold_proposals(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Dreaming proposals with their status, folded from `proposals.jsonl` (pure)."""
    folded: dict[str, dict[str, Any]] = {}
    for event in events:
        pid = str(event.get("proposal_id"))
        if event.get("event") == "recorded":
            folded[pid] = {**event, "status": "advisory", "history": [event]}
        elif pid in folded:
            current = folded[pid]
            current["history"].append(event)
            current["status"] = str(event.get("event"))
            if event.get("handoff_id"):
                current["handoff_id"] = event["handoff_id"]
    for item in folded.values():
        item.pop("event", None)
    return list(folded.values())


def _records_or_none(path: Path) -> list[dict[str, Any]] | None:
    try:
        return read_records(path)
    except StateError:
        return None


def raw_material_in(files: Iterable[tuple[str, Sequence[Mapping[str, Any]] | None]]) -> list[str]:
    """Raw-material keys ("file: key.path") over (file name, its records or None when it
    does not parse), in the order given; at most MAX_FOUND (pure)."""
    from loopx_chat.goals.raw_audit import MAX_FOUND

    found: list[str] = []
    for name, records in files:
        found.extend(raw_findings(name, records))
    return found[:MAX_FOUND]


def raw_findings(name: str, records: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """One file's part of `raw_material_in` (a file's findings depend on it alone)."""
    from loopx_chat.goals.raw_audit import raw_key_paths

    return [] if records is None else [f"{name}: {key}" for key in raw_key_paths(records)]


def stopped_from(lifecycle: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The stop event in force (the last lifecycle record, when it stops), or None (pure)."""
    last = lifecycle[-1] if lifecycle else None
    return dict(last) if last and last.get("event") == "stopped" else None


def current_rewards_from(rewards: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One reward per judged turn: the latest (pure)."""
    latest: dict[str, dict[str, Any]] = {}
    for entry in rewards:
        latest[str(entry.get("run_ref"))] = dict(entry)
    return list(latest.values())


class GoalLedger:
    """A goal's own record: goal_state, lifecycle, rewards and proposals, in the goal's
    folder and under its lock (both owned by the `GateStore` it is given)."""

    def __init__(self, goals: GateStore) -> None:
        self.goals = goals

    def _path(self, goal_id: str, name: str) -> Path:
        return self.goals.goal_dir(validate_goal_id(goal_id)) / name

    def raw_material(self, goal_id: str) -> list[str]:
        """Raw-material keys on any of the goal's record files ("file: key.path"), which
        our writers refuse but a hand edit or another tool may have put there. A file that
        does not parse is skipped here: its own reader reports it."""
        folder = self.goals.goal_dir(validate_goal_id(goal_id))
        try:
            paths = sorted(p for p in folder.iterdir() if p.suffix == ".jsonl")
        except (FileNotFoundError, NotADirectoryError):
            return []
        return raw_material_in((path.name, _records_or_none(path)) for path in paths)

    # -- goal_state ------------------------------------------------------------------------
    def set_goal_state(
        self, goal_id: str, fields: Mapping[str, Any], *, actor: str = "owner"
    ) -> GoalState:
        refuse_raw_keys(fields, "goal_state")
        unknown = sorted(set(fields) - GOAL_STATE_FIELDS)
        if unknown:
            raise UsageError(f"unknown goal_state fields: {unknown}", error_code="usage_error")
        current = self.goal_state(goal_id)
        base = current.to_dict() if current else {}
        objective = fields.get("objective", base.get("objective"))
        if not isinstance(objective, str):
            raise UsageError("a goal_state needs an objective", error_code="usage_error")
        budget = fields.get("token_budget", base.get("token_budget"))
        if budget is not None and (
            not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0
        ):
            raise UsageError("token_budget must be a positive integer", error_code="usage_error")
        boundary = fields.get("boundary", base.get("boundary"))
        acceptance = _text_list(fields.get("acceptance", base.get("acceptance", [])), "criteria")
        if not acceptance:
            raise UsageError(
                "a goal_state needs at least one acceptance criterion (--acceptance TEXT): "
                "how will a person know the goal is met?",
                error_code="acceptance_required",
            )
        stop = fields.get("stop_condition", base.get("stop_condition"))
        policy = approval_policy_field(fields.get("approval_policy", base.get("approval_policy")))
        plan = fields.get("plan", base.get("plan"))
        if plan is not None and not isinstance(plan, bool):
            raise UsageError("plan must be true or false", error_code="input_invalid")
        resume = fields.get("resume_after_usage_limit", base.get("resume_after_usage_limit"))
        if resume is not None and not isinstance(resume, bool):
            raise UsageError(
                "resume_after_usage_limit must be true or false", error_code="input_invalid"
            )
        record = {
            "schema_version": GOAL_STATE_SCHEMA,
            "record_id": "goalstate-" + uuid.uuid4().hex[:12],
            "goal_id": goal_id,
            "created_at": self.goals.now(),
            "actor": _actor(actor),
            "objective": public_text(objective, "objective"),
            "acceptance": acceptance,
            "stop_condition": public_text(stop, "stop condition") if stop else None,
            "non_goals": _text_list(
                fields.get("non_goals", base.get("non_goals", [])), "non-goals"
            ),
            "authority_sources": _text_list(
                fields.get("authority_sources", base.get("authority_sources", [])),
                "authority sources",
            ),
            "boundary": public_text(boundary, "boundary") if boundary not in (None, "") else None,
            "token_budget": budget,
            "approval_policy": policy,
            "plan": plan,
            "resume_after_usage_limit": resume,
            "previous": {k: base[k] for k in GOAL_STATE_FIELDS if k in base} or None,
        }
        with self.goals.locked(goal_id):
            append_record(self._path(goal_id, "goal_state.jsonl"), record)
        state = self.goal_state(goal_id)
        assert state is not None
        return state

    def goal_state_history(self, goal_id: str) -> list[dict[str, Any]]:
        return read_records(self._path(goal_id, "goal_state.jsonl"), GOAL_STATE_SCHEMA)

    def goal_state(self, goal_id: str) -> GoalState | None:
        return goal_state_from(goal_id, self.goal_state_history(goal_id))

    # -- lifecycle -------------------------------------------------------------------------
    def set_stopped(
        self, goal_id: str, stopped: bool, *, reason: str | None = None, actor: str = "owner"
    ) -> dict[str, Any]:
        """`goal stop` / `goal resume`: a stopped goal gets no automatic turn (quota `paused`)."""
        record = {
            "schema_version": LIFECYCLE_SCHEMA,
            "event": "stopped" if stopped else "resumed",
            "record_id": "lifecycle-" + uuid.uuid4().hex[:12],
            "goal_id": goal_id,
            "created_at": self.goals.now(),
            "actor": _actor(actor),
            "reason": public_text(reason, "reason") if reason else None,
        }
        with self.goals.locked(goal_id):
            previous = self.lifecycle(goal_id)
            record["previous"] = previous["event"] if previous else None
            append_record(self._path(goal_id, "lifecycle.jsonl"), record)
        return record

    def lifecycle(self, goal_id: str) -> dict[str, Any] | None:
        """The latest stop/resume event, or None when the goal was never stopped."""
        history = read_records(self._path(goal_id, "lifecycle.jsonl"), LIFECYCLE_SCHEMA)
        return history[-1] if history else None

    def stopped(self, goal_id: str) -> dict[str, Any] | None:
        """The stop event in force, or None when the goal runs."""
        return stopped_from(read_records(self.lifecycle_path(goal_id), LIFECYCLE_SCHEMA))

    def lifecycle_path(self, goal_id: str) -> Path:
        """Where `goal stop` and `goal resume` are recorded (a follower stats it)."""
        return self._path(goal_id, "lifecycle.jsonl")

    # -- human_reward ----------------------------------------------------------------------
    def record_reward(
        self,
        goal_id: str,
        *,
        run_ref: str,
        label: str,
        reason: str,
        goal_turns: Collection[str],
        actor: str = "owner",
    ) -> dict[str, Any]:
        """A person's judgment of one turn of this goal; a later one for the same turn
        replaces it (the earlier stays in the history, `replaces` names it)."""
        from loopx_chat.session_runtime.writeback_contract import REWARD_LABELS  # see above

        if label not in REWARD_LABELS:
            raise UsageError("label must be good, bad or mixed", error_code="usage_error")
        fields = {"run_ref": run_ref, "label": label, "reason": reason}
        refuse_raw_keys(fields, "human_reward")
        record: dict[str, Any] = {
            "schema_version": REWARD_SCHEMA,
            "reward_id": "reward-" + uuid.uuid4().hex[:12],
            "goal_id": goal_id,
            "created_at": self.goals.now(),
            "actor": _actor(actor),
            "run_ref": validate_goal_id(run_ref),
            "label": label,
            "reason": public_text(reason, "reason"),
            # A person's judgment, never a score: nothing automated writes or reads it as one.
            "kind": "human_judgment",
        }
        if run_ref not in goal_turns:
            raise StateError(
                f"no turn {run_ref} in goal {goal_id}: a reward judges a turn of that goal "
                "(see `loopx-chat chat turns`)",
                error_code="turn_not_found",
            )
        with self.goals.locked(goal_id):
            earlier = [r for r in self.rewards(goal_id) if r.get("run_ref") == run_ref]
            record["replaces"] = earlier[-1]["reward_id"] if earlier else None
            append_record(self._path(goal_id, "rewards.jsonl"), record)
        return record

    def rewards(self, goal_id: str) -> list[dict[str, Any]]:
        """Every reward ever recorded, oldest first (the history)."""
        return read_records(self._path(goal_id, "rewards.jsonl"), REWARD_SCHEMA)

    def current_rewards(self, goal_id: str) -> list[dict[str, Any]]:
        """One reward per judged turn: the latest."""
        return current_rewards_from(self.rewards(goal_id))

    # -- dreaming_proposal -----------------------------------------------------------------
    def record_proposal(
        self, goal_id: str, *, title: str, rationale: str, next_action: str, actor: str = "agent"
    ) -> dict[str, Any]:
        fields = {"title": title, "rationale": rationale, "proposed_next_action": next_action}
        refuse_raw_keys(fields, "dreaming_proposal")
        record = {
            "schema_version": PROPOSAL_SCHEMA,
            "event": "recorded",
            "proposal_id": "proposal-" + uuid.uuid4().hex[:12],
            "goal_id": goal_id,
            "created_at": self.goals.now(),
            "actor": _actor(actor),
            "title": public_text(title, "title"),
            "rationale": public_text(rationale, "rationale"),
            "proposed_next_action": public_text(next_action, "proposed next action"),
        }
        with self.goals.locked(goal_id):
            self.proposals(goal_id)  # an unreadable log takes no new record
            append_record(self._path(goal_id, "proposals.jsonl"), record)
        return self.proposal(goal_id, record["proposal_id"])

    def proposals(self, goal_id: str) -> list[dict[str, Any]]:
        return fold_proposals(read_records(self._path(goal_id, "proposals.jsonl"), PROPOSAL_SCHEMA))

    def proposal(self, goal_id: str, proposal_id: str) -> dict[str, Any]:
        for item in self.proposals(goal_id):
            if item["proposal_id"] == proposal_id:
                return item
        raise StateError(
            f"no proposal {proposal_id} for goal {goal_id}", error_code="proposal_not_found"
        )

    def _open_proposal(self, goal_id: str, proposal_id: str) -> dict[str, Any]:
        current = self.proposal(goal_id, proposal_id)
        if current["status"] != "advisory":
            raise StateError(
                f"proposal {proposal_id} was already {current['status']}",
                error_code="proposal_already_closed",
            )
        return current

    def _close_proposal(
        self, goal_id: str, proposal_id: str, event: str, actor: str, **extra: Any
    ) -> None:
        """Append the closing event; the caller holds the goal's lock and has checked."""
        append_record(
            self._path(goal_id, "proposals.jsonl"),
            {
                "schema_version": PROPOSAL_SCHEMA,
                "event": event,
                "proposal_id": proposal_id,
                "goal_id": goal_id,
                "created_at": self.goals.now(),
                "actor": _actor(actor),
                "previous": {"status": "advisory"},
                **extra,
            },
        )

    def promote(
        self, goal_id: str, proposal_id: str, *, stop_condition: str, actor: str = "owner"
    ) -> tuple[dict[str, Any], Handoff]:
        """Turn an advisory proposal into a handoff packet: only now can it cause action.
        Check and both writes hold the goal's lock: parallel promotes write one packet."""
        _actor(actor)
        with self.goals.locked(goal_id) as folder:
            current = self._open_proposal(goal_id, proposal_id)
            packet = self.goals.new_handoff(
                goal_id, current["proposed_next_action"], stop_condition, (proposal_id,)
            )
            self.goals.append_handoff(folder, packet)
            self._close_proposal(
                goal_id, proposal_id, "promoted", actor, handoff_id=packet.handoff_id
            )
        self.goals.control.record("handoff_recorded", goal_id=goal_id, handoff_id=packet.handoff_id)
        return self.proposal(goal_id, proposal_id), packet

    def dismiss(
        self, goal_id: str, proposal_id: str, *, actor: str = "owner", event: str = "dismissed"
    ) -> dict[str, Any]:
        """Dismiss (or, with event="closed", close) an advisory proposal, under the lock."""
        _actor(actor)
        with self.goals.locked(goal_id):
            self._open_proposal(goal_id, proposal_id)
            self._close_proposal(goal_id, proposal_id, event, actor)
        return self.proposal(goal_id, proposal_id)
