"""The compact turn records of managed sessions: every state change a turn makes.

Owns the writes around a turn: accepting it (turn record `running`, session `busy` with its
`active_turn_id`), finishing it (compact outcome, session `ready`, `turn_count`, the
`turn_finished` control event), queueing attached-host turns, marking steers, replays by
`client_turn_id`, and settling a turn that a dead controller left `running`. An outcome the
full disk would not take is kept in the session's outcome slot (`state/outcome_slot`) and
recorded from there (`record_parked`) once space returns, or by the next command that
settles the session: never left `running`, never relabelled `interrupted`. It never talks
to Codex and never stores text: ids, statuses, timestamps, token counts and error codes (and,
while a turn runs, the sha256 of its message, so a refusal can tell the same work).
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from pathlib import Path

from loopx_chat.codex.thread import TurnOutcome
from loopx_chat.errors import LoopxChatError, Remedy, StateError
from loopx_chat.state import outcome_slot
from loopx_chat.state.control_events import ControlLog
from loopx_chat.state.session_records import (
    TERMINAL_TURN_STATUSES,
    SessionRecord,
    SessionStatus,
    TurnRecord,
    TurnStatus,
)
from loopx_chat.state.session_store import SessionStore


@dataclass(frozen=True)
class TurnResult:
    session: SessionRecord
    turn: TurnRecord
    created: bool


class TurnNotRecorded(StateError):
    """Codex finished the turn, but its outcome could not be written (the disk is full)."""

    default_code = "state_unwritable"

    def __init__(self, turn: TurnRecord, kept: bool) -> None:
        later = (
            "it is kept aside and recorded once space returns, or by the next command on "
            f"session {turn.session_id}"
            if kept
            else "free some space, then `loopx-chat chat interrupt "
            f"{turn.session_id}` records it as interrupted"
        )
        super().__init__(
            f"Codex finished turn {turn.turn_id} ({turn.status}), but the state dir could not "
            f"take its outcome (the disk is full?); {later}",
            remedy=Remedy(
                summary="The disk that holds loopx-chat's state dir is full.",
                next_action="Free some space there: the turn is then recorded as Codex "
                "finished it, by the service on its own or by the next command on the session "
                f"(`loopx-chat chat send {turn.session_id} …`).",
            ),
        )
        self.turn = turn
        self.kept = kept


# The file another process writes to ask the session's running turn to stop (`chat
# interrupt`): it holds the turn's id; a chat turn and a goal loop's follower look for it.
INTERRUPT_MARKER = "interrupt.request"


def message_digest(text: str) -> str:
    """What a running turn keeps of its message: a sha256, never the text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class TurnLedger:
    def __init__(self, store: SessionStore, control: ControlLog) -> None:
        self.store = store
        self.control = control

    def interrupt_marker(self, session_id: str) -> Path:
        return self.store.session_dir(session_id) / INTERRUPT_MARKER

    def replayed(self, record: SessionRecord, turn: TurnRecord) -> TurnResult:
        """A retry of a recorded `client_turn_id`: nothing runs again."""
        self.control.record(
            "submit_replayed",
            goal_id=record.goal_id,
            session_id=record.session_id,
            turn_id=turn.turn_id,
        )
        return TurnResult(record, turn, created=False)

    def queue_attached(self, record: SessionRecord, client_turn_id: str | None) -> TurnResult:
        """Attached-host sessions never spawn: their turns wait for the host as `queued`."""
        with self.store.lock(record.session_id):
            if client_turn_id is not None:
                existing = self.store.find_turn_by_client_id(record.session_id, client_turn_id)
                if existing is not None:
                    return TurnResult(record, existing, created=False)
            now = self.store.now()
            turn = self.store.save_turn(
                TurnRecord(
                    turn_id=uuid.uuid4().hex,
                    session_id=record.session_id,
                    status=TurnStatus.QUEUED,
                    created_at=now,
                    updated_at=now,
                    client_turn_id=client_turn_id,
                )
            )
        return TurnResult(self.store.load(record.session_id), turn, created=True)

    def mark_steered(self, session_id: str, turn_id: str) -> TurnRecord:
        turn = self.store.load_turn(session_id, turn_id)
        with self.store.lock(session_id):
            return self.store.save_turn(
                turn.with_changes(steered=True, updated_at=self.store.now())
            )

    def draft(
        self,
        session_id: str,
        client_turn_id: str | None,
        text_digest: str | None = None,
        *,
        origin: str | None = None,
        run_id: str | None = None,
        upstream_turn_id: str | None = None,
    ) -> TurnRecord:
        """The turn about to run, not yet recorded: the caller holds it before any write, so a
        stop that lands inside `begin` still knows which turn to settle (`stopped`)."""
        now = self.store.now()
        return TurnRecord(
            turn_id=uuid.uuid4().hex,
            session_id=session_id,
            status=TurnStatus.RUNNING,
            created_at=now,
            updated_at=now,
            client_turn_id=client_turn_id,
            text_digest=text_digest,
            origin=origin,
            run_id=run_id,
            upstream_turn_id=upstream_turn_id,
        )

    def begin(self, turn: TurnRecord) -> TurnRecord:
        """Record the turn as running before it starts, so a crash leaves a trace to settle."""
        # One lock and one read for the whole step: this is on every turn's path.
        with self.store.lock(turn.session_id):
            record = self.store.load(turn.session_id)
            if record.active_turn_id:
                self._settle(record)
                record = self.store.load(turn.session_id)
            # Not fsynced: a SIGKILL keeps them (atomic renames, page cache), and after a power
            # cut that drops them the host's rollout still shows the turn (staleness says so).
            self.store.save_turn(turn, durable=False)
            # Where the outcome goes if the disk fills during the turn: made once per session.
            outcome_slot.ensure(self.store.session_dir(turn.session_id))
            self.store.mutate(
                turn.session_id,
                lambda r: r.with_changes(
                    {"status": SessionStatus.BUSY, "active_turn_id": turn.turn_id}
                ),
                durable=False,
                current=record,
            )
        return turn

    def stopped(self, turn: TurnRecord) -> None:
        """The controller was stopped (SIGTERM, Ctrl-C) before the turn had an outcome: a turn
        `begin` recorded, even in part, is recorded as interrupted; one it never wrote is not."""
        try:
            recorded = self.store.load_turn(turn.session_id, turn.turn_id)
        except LoopxChatError:
            return
        if recorded.status not in TERMINAL_TURN_STATUSES:
            self._interrupted(turn, "controller_stopped")

    def finish(self, turn: TurnRecord, outcome: TurnOutcome) -> TurnResult:
        """Record the outcome; the session as it was written comes back with it, so the
        caller needs no read of its own. When the disk will not take it, the outcome is kept
        in the session's slot and `TurnNotRecorded` says so (`record_parked` writes it)."""
        now = self.store.now()
        final = turn.with_changes(
            upstream_turn_id=outcome.upstream_turn_id or turn.upstream_turn_id,
            status=outcome.status,
            error_code=outcome.error_code,
            tokens=outcome.tokens,
            completed_at=now,
            updated_at=now,
            text_digest=None,  # only a running turn needs it
        )
        try:
            return self._record(final)
        except StateError as exc:
            if exc.error_code != "state_unwritable":
                raise
            try:
                kept = outcome_slot.park(self.store.session_dir(turn.session_id), final.to_dict())
            except StateError:
                kept = False
            raise TurnNotRecorded(final, kept) from None

    def _record(self, final: TurnRecord) -> TurnResult:
        """Write a finished turn and the session it leaves ready, then the control event."""
        with self.store.lock(final.session_id):
            # The outcome is the record that must survive a power cut: the one fsync of a
            # turn. The session's counters follow it and `settle_orphan` repairs a session
            # that still says busy for a turn whose record is final.
            self.store.save_turn(final)
            session = self.store.mutate(
                final.session_id,
                lambda r: r.with_changes(
                    {
                        "status": SessionStatus.READY,
                        "active_turn_id": None,
                        "turn_count": r.turn_count + 1,
                        "last_error_code": final.error_code,
                        "last_activity_at": final.completed_at,
                    }
                ),
                durable=False,
            )
        self.control.record(
            "turn_finished",
            goal_id=session.goal_id,
            session_id=session.session_id,
            thread_id=session.upstream_thread_id,
            turn_id=final.turn_id,
            status=final.status,
            code=final.error_code,
            session_created_at=session.created_at,
            started_at=final.created_at,
            origin=final.origin or "chat",
        )
        return TurnResult(session, final, created=True)

    def record_parked(self, session_id: str) -> TurnRecord | None:
        """Write the outcome the session's slot keeps, if it is still the session's active
        turn (else the slot is only blanked); the turn recorded, or None. A disk still full
        raises `state_unwritable` and keeps the slot."""
        folder = self.store.session_dir(session_id)
        kept = outcome_slot.parked(folder)
        if kept is None:
            return None
        try:
            final = TurnRecord.from_dict(kept)
        except (LoopxChatError, TypeError, ValueError):
            final = None
        with self.store.lock(session_id):
            active = self.store.load(session_id).active_turn_id
            if final is None or final.session_id != session_id or active != final.turn_id:
                outcome_slot.clear(folder)
                return None
            self._record(final)
            outcome_slot.clear(folder)
        return final

    def settle_orphan(self, session_id: str, code: str = "app_server_exited") -> None:
        """A turn left `running` by a controller that died (or was stopped between recording
        the turn and following it) is recorded as interrupted, with `code`."""
        record = self.store.load(session_id)
        if record.active_turn_id:
            self._settle(record, code)

    def _settle(self, record: SessionRecord, code: str = "app_server_exited") -> None:
        assert record.active_turn_id is not None
        if self.record_parked(record.session_id) is not None:
            return  # it finished; only the disk was full
        try:
            turn = self.store.load_turn(record.session_id, record.active_turn_id)
        except LoopxChatError:
            self.store.update(record.session_id, active_turn_id=None, status=SessionStatus.READY)
            return
        if turn.status not in TERMINAL_TURN_STATUSES:
            self._interrupted(turn, code)
        else:
            self.store.update(record.session_id, active_turn_id=None, status=SessionStatus.READY)

    def _interrupted(self, turn: TurnRecord, code: str) -> None:
        """Record a turn that never got its outcome as interrupted, with the tokens it had."""
        outcome = TurnOutcome(
            turn.upstream_turn_id or "", TurnStatus.INTERRUPTED, code, turn.tokens
        )
        self.finish(turn, outcome)
