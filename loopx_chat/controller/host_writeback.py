"""Controlled writeback (Phase 2) of compact loopx decisions onto the Codex thread goal.

Owns the flow build → validate → dry-run preview → apply → compact result, idempotency by
`<goal>:<run>.<session>:<write_class>` (the same decision on another thread is another write),
conflict safety (apply and revert first compare the host goal with what we last wrote on
that thread; if someone else changed it since, `writeback_conflict` and nothing changes),
reversibility (every applied write keeps the host's prior goal
so `revert` restores it exactly), and the goal's writeback log
`<state>/goals/<goal>/writebacks.jsonl` (append-only, compact: ids, codes, the prior and new
host goal). The pure contract lives in `session_runtime.writeback`; the host calls go through
`goal_target`, which reads and sets the goal without loading the thread: a preview,
apply or revert starts no turn and sends no model request. A writeback failure never changes
the loopx decision it came from: gates and handoffs are only read here.

Class mapping on the Codex host (the only target it can represent):
- operator gate requested → goal status `blocked` (objective kept, or a compact placeholder);
- operator gate resolved → the status it had before the request's writeback, exactly;
- handoff packet → objective = the handoff's next action, status `paused`;
- other classes → `skipped` with `unsupported_class`, never faked; they are still named and
  recorded: a reward (`reward-…` → `human_reward_overlay`), a recorded quota decision
  (`quota-…` → `quota_decision_hint`, in the contract's hint words) and a turn of the goal
  (its turn id → `artifact_pointer`, outcome = the turn's status).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.controller.goal_target import HostGoal, thread_goal
from loopx_chat.errors import LoopxChatError, UsageError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_facts import goal_turns
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.quota import contract_hint, quota_decisions
from loopx_chat.session_runtime.writeback import (
    EntryFacts,
    WritebackPlan,
    build_writeback,
    writeback_result,
)
from loopx_chat.state.jsonl import append_record, read_records
from loopx_chat.state.session_store import utc_now

HOST_CLASSES = frozenset({"operator_gate_decision", "handoff_packet_pointer"})


@dataclass(frozen=True)
class Source:
    """What is being written back: a gate (requested/resolved) or a handoff packet."""

    write_class: str
    run_id: str
    payload: dict[str, Any]
    event_class: str


class WritebackService:
    def __init__(self, controller: ChatController, goals: GateStore) -> None:
        self.controller = controller
        self.goals = goals

    # -- sources ---------------------------------------------------------------------------
    def source_for(self, goal_id: str, ref: str) -> Source:
        """The recorded decision `ref` names; its id's kind names the write class."""
        if ref.startswith("gate-"):
            return self._gate_source(goal_id, ref)
        if ref.startswith("handoff-"):
            return self._handoff_source(goal_id, ref)
        if ref.startswith("reward-"):
            return self._reward_source(goal_id, ref)
        if ref.startswith("quota-"):
            return self._quota_source(goal_id, ref)
        if turn := next(
            (t for t in goal_turns(self.controller.store, goal_id) if t.turn_id == ref), None
        ):
            return Source(
                "artifact_pointer",
                turn.turn_id,
                {"artifact_id": turn.turn_id, "outcome_class": turn.status},
                "run_pointer",
            )
        raise LoopxChatError(
            f"unknown writeback source {ref!r} for goal {goal_id}: give a gate-…, "
            "handoff-…, reward-… or quota-… id, or a turn id of the goal (an artifact "
            "pointer)",
            error_code="writeback_no_source",
        )

    def _gate_source(self, goal_id: str, ref: str) -> Source:
        gate = self.goals.gate(goal_id, ref)
        label = "requested" if gate.status == "pending" else gate.status
        payload = {
            "decision_id": gate.gate_id,
            "decision_label": label,
            "actor_class": gate.actor,
            "source_run_id": f"{gate.gate_id}.{label}",
        }
        if gate.reason:
            payload["reason_summary"] = gate.reason
        return Source("operator_gate_decision", f"{gate.gate_id}.{label}", payload, "operator_gate")

    def _handoff_source(self, goal_id: str, ref: str) -> Source:
        packet = next((h for h in self.goals.handoffs(goal_id) if h.handoff_id == ref), None)
        if packet is None:
            raise _no_source("handoff", ref, goal_id)
        payload = {
            "handoff_id": packet.handoff_id,
            "next_action": packet.next_action,
            "stop_condition": packet.stop_condition,
            "evidence_pointer_count": len(packet.evidence_refs),
        }
        return Source("handoff_packet_pointer", packet.handoff_id, payload, "handoff_packet")

    def _reward_source(self, goal_id: str, ref: str) -> Source:
        records = GoalLedger(self.goals)
        entry = next((r for r in records.rewards(goal_id) if r.get("reward_id") == ref), None)
        if entry is None:
            raise _no_source("reward", ref, goal_id)
        payload = {
            "reward_id": ref,
            "judged_run_id": entry.get("run_ref"),
            "label": entry.get("label"),
            "reason_summary": entry.get("reason"),
        }
        return Source("human_reward_overlay", ref, payload, "human_reward")

    def _quota_source(self, goal_id: str, ref: str) -> Source:
        decisions = quota_decisions(goal_id, GoalLedger(self.goals))
        entry = next((d for d in decisions if d.get("decision_id") == ref), None)
        if entry is None:
            raise _no_source("quota decision", ref, goal_id)
        payload = {
            "hint": contract_hint(str(entry.get("decision"))),
            "window_id": ref,
            "reason_code": entry.get("reason_code"),
        }
        return Source("quota_decision_hint", ref, payload, "quota_decision")

    def _session_for(self, goal_id: str, session_id: str | None) -> str | None:
        if session_id:
            owner = self.controller.store.load(session_id).goal_id
            if owner != goal_id:
                raise UsageError(
                    f"session {session_id} belongs to goal {owner}, not {goal_id}: a writeback "
                    "only touches a thread of its own goal; nothing was read or written",
                    error_code="session_goal_mismatch",
                )
            return session_id
        bound = str(self.controller.codex_home)
        candidates = [
            s
            for s in self.controller.store.list().sessions
            if s.goal_id == goal_id
            and s.session_mode == "managed_runtime"
            and s.codex_home == bound
        ]
        return max(candidates, key=lambda s: s.updated_at).session_id if candidates else None

    # -- flow ------------------------------------------------------------------------------
    def plan(
        self, goal_id: str, source: Source, session_id: str | None
    ) -> tuple[WritebackPlan, str | None]:
        sid = self._session_for(goal_id, session_id)
        record = self.controller.store.load(sid) if sid else None
        entry = EntryFacts(
            projection_present=record is not None,
            source_event_recorded=True,  # the source was read from the goal's own records
            runtime_supports_dry_run=True,  # preview reads the goal and computes, never writes
            runtime_available=bool(record and record.upstream_thread_id),
        )
        plan = build_writeback(
            goal_id=goal_id,
            agent_id="codex",
            runtime_id="codex_app_server",
            session_id=sid or "none",
            source_run_id=f"{source.run_id}.{sid or 'none'}",
            source_todo_id=f"{source.run_id}.{sid or 'none'}",
            source_event_class=source.event_class,
            write_class=source.write_class,
            payload=source.payload,
            entry=entry,
        )
        return plan, sid

    def _desired(
        self, goal_id: str, source: Source, prior: HostGoal | None
    ) -> tuple[str, str] | None:
        """(objective, status) to set, or None to restore the pre-request goal."""
        if source.write_class == "handoff_packet_pointer":
            return str(source.payload["next_action"]), "paused"
        label = source.payload.get("decision_label")
        if label == "requested":
            objective = (
                prior.objective if prior else f"loopx-chat goal {goal_id}: owner gate pending"
            )
            return objective, "blocked"
        return None

    def preview(self, goal_id: str, ref: str, session_id: str | None = None) -> dict[str, Any]:
        source = self.source_for(goal_id, ref)
        plan, sid = self.plan(goal_id, source, session_id)
        doc: dict[str, Any] = {
            "ok": plan.may_apply,
            "plan": plan.document,
            "status": plan.status,
            "reason_code": plan.reason_code,
            "blocker": plan.blocker,
        }
        if plan.may_apply and source.write_class not in HOST_CLASSES:
            doc["host_after"] = "unchanged: apply records skipped (unsupported_class)"
        elif plan.status == "previewed" and sid:
            try:
                with thread_goal(self.controller, sid) as host:
                    prior = host.read()
                doc["host_before"] = prior.to_dict() if prior else None
                desired = self._desired(goal_id, source, prior)
                doc["host_after"] = (
                    {"objective": desired[0], "status": desired[1]} if desired else "restore prior"
                )
            except LoopxChatError as exc:
                doc.update(ok=False, status="failed", reason_code=exc.error_code)
        return doc

    def apply(self, goal_id: str, ref: str, session_id: str | None = None) -> dict[str, Any]:
        source = self.source_for(goal_id, ref)
        plan, sid = self.plan(goal_id, source, session_id)
        key = (
            plan.document.get("writeback", {}).get("idempotency_key")
            if isinstance(plan.document, dict)
            else None
        )
        if plan.status != "previewed":
            return self._log(
                goal_id,
                writeback_result(
                    plan,
                    status="rejected" if plan.status == "rejected" else "skipped",
                    reason_code=plan.reason_code,
                ),
                blocker=plan.blocker,
            )
        if source.write_class not in HOST_CLASSES:
            return self._log(
                goal_id, writeback_result(plan, status="skipped", reason_code="unsupported_class")
            )
        if key and self._last_status(goal_id, key) == "applied":
            return self._log(
                goal_id, writeback_result(plan, status="skipped", reason_code="already_applied")
            )
        assert sid is not None
        try:
            with thread_goal(self.controller, sid) as host:
                prior = host.read()
                self._check_unchanged(goal_id, sid, prior)
                desired = self._desired(goal_id, source, prior)
                if desired is None:
                    written, before = self._request_prior(
                        goal_id, str(source.payload.get("decision_id")), sid
                    )
                    if not written:
                        # Nothing of ours to undo: clearing would clear the user's own goal.
                        return self._log(
                            goal_id,
                            writeback_result(
                                plan, status="skipped", reason_code="request_not_written"
                            ),
                        )
                    host.restore(before)
                    after = before
                else:
                    after = host.write(desired[0], desired[1])
        except LoopxChatError as exc:
            if exc.error_code == "writeback_conflict":
                raise  # refused before any write: nothing to record as attempted
            return self._log(
                goal_id, writeback_result(plan, status="failed", reason_code=exc.error_code)
            )
        result = writeback_result(plan, status="applied", runtime_event_id=f"thread-goal:{sid}")
        return self._log(
            goal_id,
            result,
            session_id=sid,
            prior=prior.to_dict() if prior else None,
            applied=after.to_dict() if after else None,
        )

    def revert(self, goal_id: str, key: str) -> dict[str, Any]:
        record = next(
            (
                r
                for r in reversed(self.records(goal_id))
                if r.get("idempotency_key") == key and r.get("status") == "applied"
            ),
            None,
        )
        if record is None or self._last_status(goal_id, key, ("applied", "reverted")) == "reverted":
            raise LoopxChatError(
                f"no applied writeback {key} to revert", error_code="writeback_not_applied"
            )
        prior = record.get("prior")
        host_prior = HostGoal(**prior) if isinstance(prior, dict) else None
        sid = str(record["session_id"])
        try:
            with thread_goal(self.controller, sid) as host:
                self._check_unchanged(goal_id, sid, host.read())
                host.restore(host_prior)
        except LoopxChatError as exc:
            if exc.error_code == "writeback_conflict":
                raise  # refused before any write: nothing to record as attempted
            return self._log(
                goal_id,
                {
                    **_strip(record),
                    "status": "failed",
                    "reason_code": exc.error_code,
                    "action": "revert",
                },
            )
        return self._log(
            goal_id,
            {**_strip(record), "status": "reverted", "reason_code": None, "action": "revert"},
        )

    # -- the goal's writeback log ----------------------------------------------------------
    def _path(self, goal_id: str) -> Any:
        return self.goals.goal_dir(goal_id) / "writebacks.jsonl"

    def records(self, goal_id: str) -> list[dict[str, Any]]:
        return read_records(self._path(goal_id))

    def _last_status(self, goal_id: str, key: str, among: tuple[str, ...] = ()) -> str | None:
        """The status of the key's last record (of those with a status in `among`, if given)."""
        statuses = [
            r.get("status")
            for r in self.records(goal_id)
            if r.get("idempotency_key") == key and (not among or r.get("status") in among)
        ]
        return statuses[-1] if statuses else None

    def _check_unchanged(self, goal_id: str, sid: str, current: HostGoal | None) -> None:
        """Refuse when the host goal is not what we last left on this thread."""
        ours = [
            r
            for r in self.records(goal_id)
            if r.get("session_id") == sid and r.get("status") in ("applied", "reverted")
        ]
        if not ours:
            return  # we never wrote here: what we read now is the baseline
        last = ours[-1]
        left = last.get("applied") if last["status"] == "applied" else last.get("prior")
        expected = HostGoal(**left) if isinstance(left, dict) else None
        if _shape(expected) != _shape(current):
            raise LoopxChatError(
                f"writeback_conflict: the thread goal changed since loopx-chat last wrote it "
                f"(expected {_shape(expected)}, found {_shape(current)}); nothing was changed. "
                "Check with the person who changed it, then preview again",
                error_code="writeback_conflict",
            )

    def _request_prior(self, goal_id: str, gate_id: str, sid: str) -> tuple[bool, HostGoal | None]:
        """(whether the gate's request was written to this thread, the goal before it)."""
        key_prefix = f"{goal_id}:{gate_id}.requested.{sid}:"
        for record in reversed(self.records(goal_id)):
            if (
                str(record.get("idempotency_key", "")).startswith(key_prefix)
                and record.get("status") == "applied"
            ):
                prior = record.get("prior")
                return True, HostGoal(**prior) if isinstance(prior, dict) else None
        return False, None

    def _log(self, goal_id: str, result: dict[str, Any], **extra: Any) -> dict[str, Any]:
        entry = {
            **result,
            **{k: v for k, v in extra.items() if v is not None},
            "at": utc_now(),
        }
        append_record(self._path(goal_id), entry)
        return entry


def _shape(goal: HostGoal | None) -> dict[str, str] | None:
    return {"objective": goal.objective, "status": goal.status} if goal else None


def _strip(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("at", "status", "reason_code")}


def _no_source(kind: str, ref: str, goal_id: str) -> LoopxChatError:
    return LoopxChatError(f"no {kind} {ref} for goal {goal_id}", error_code="writeback_no_source")
