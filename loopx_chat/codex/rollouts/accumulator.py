"""The per-file accumulator: everything needed to continue one rollout from its consumed offset.

What this module owns:
  * `_Acc`, the mutable state of one file while it is read (turn counts, open turns, the last
    turn, token totals, models, history mode, the thread id from the first session_meta, the
    newest time, and the file's read mode), how a parsed record or turn event advances it,
    its flat row in the index (`to_row` / `from_row`), the `ThreadFacts` it yields, and the
    accumulator a finished file's facts stand for (`from_facts`, for an entry that dropped it).

What it must never do:
  * keep anything a picker in `fields` did not let through, or accept an index shape it did
    not write (that raises ValueError, and the index is rebuilt);
  * read files or find records in bytes: the reader in `parse` feeds it.
"""

from __future__ import annotations

import sys
from typing import Any

from loopx_chat.codex.rollouts.fields import (
    _ID,
    _KIND,
    _TIMESTAMP,
    _TOKEN_KEYS,
    _pick_error_code,
    _pick_id,
    _pick_int,
    _pick_kind,
    _pick_model,
    _pick_time,
    _pick_tokens,
)
from loopx_chat.codex.rollouts.records import (
    OUTCOMES,
    LastTurn,
    ThreadFacts,
    TokenTotals,
    TurnCounts,
)

_MODE_FAST = "fast"
_MODE_EXACT = "exact"
_MODES = (None, _MODE_FAST, _MODE_EXACT)
_ID_OK = _ID.fullmatch
_KIND_OK = _KIND.fullmatch
_TIME_OK = _TIMESTAMP.fullmatch
_KEPT_MODELS: dict[str, str | None] = {}  # stored name -> what the picker makes of it
# The outcomes as the module's own constants, so a row loaded from the index shares them.
_OUTCOME_OF = {outcome: outcome for outcome in OUTCOMES}


def _shared(value: str | None) -> str | None:
    """One copy of a short kind (history mode, error kind, model) for every row that names it.

    A long-lived scanner keeps a row per rollout file, and each row parsed from JSON or bytes
    has its own copy of these few repeated words.
    """
    return None if value is None else sys.intern(value)


# One copy of each models tuple and each turn count, for every row that has the same: most
# finished rollouts name the same model and the same few counts. Bounded by clearing.
_ONE_COPY: dict[object, Any] = {}
_ONE_COPY_MAX = 1024


def _one_copy(value: Any) -> Any:
    kept = _ONE_COPY.get(value)
    if kept is None:
        if len(_ONE_COPY) >= _ONE_COPY_MAX:
            _ONE_COPY.clear()
        kept = _ONE_COPY[value] = value
    return kept


def _kept_model(name: str) -> str | None:
    kept = _KEPT_MODELS.get(name, "")
    if kept == "":
        if len(_KEPT_MODELS) >= 256:
            _KEPT_MODELS.clear()
        kept = _KEPT_MODELS[name] = _pick_model(name)
    return kept


# How many fields `_Acc.to_row` writes.
ACC_ROW_LEN = 16


class _Acc:
    """Mutable per-file state while reading; serialized into the index between scans."""

    __slots__ = (
        "completed",
        "failed",
        "history_mode",
        "interrupted",
        "last_completed_at",
        "last_error",
        "last_id",
        "last_outcome",
        "latest",
        "meta_seen",
        "mode",
        "models",
        "open_turns",
        "started",
        "thread_id",
        "tokens",
    )

    def __init__(self) -> None:
        self.mode: str | None = None
        self.meta_seen = False
        self.thread_id: str | None = None
        self.history_mode: str | None = None
        self.started = 0
        self.completed = 0
        self.failed = 0
        self.interrupted = 0
        # Started turns with no ending yet, in start order. Only SIGKILLed or still-running
        # turns stay here, so it stays short; a tuple, so the usual empty one costs nothing.
        self.open_turns: tuple[str, ...] = ()
        self.last_id: str | None = None
        self.last_outcome: str | None = None
        self.last_error: str | None = None
        self.last_completed_at: int | None = None
        self.tokens: TokenTotals | None = None  # the facts' own record, not a copy
        # Sorted, a tuple: a kept row is compact and its facts share it.
        self.models: tuple[str, ...] = ()
        self.latest: str | None = None

    # -- events ------------------------------------------------------------------------------

    def see_time(self, value: str | None) -> None:
        if value is not None and (self.latest is None or value > self.latest):
            self.latest = value

    def turn_started(self, turn_id: str | None) -> None:
        # A repeated start of the open or last turn (a replay) is the same turn, not a new one.
        if turn_id is None or turn_id in self.open_turns or turn_id == self.last_id:
            return
        self.started += 1
        self.open_turns = (*self.open_turns, turn_id)
        self.last_id = turn_id
        self.last_outcome = "unfinished"
        self.last_error = None
        self.last_completed_at = None

    def turn_ended(
        self, turn_id: str | None, outcome: str, error: str | None, completed_at: int | None
    ) -> None:
        # The first ending of an open turn decides it; an ending for a turn we never saw start
        # (or saw end already) changes nothing.
        if turn_id is None or turn_id not in self.open_turns:
            return
        at = self.open_turns.index(turn_id)
        self.open_turns = self.open_turns[:at] + self.open_turns[at + 1 :]
        if outcome == "completed":
            self.completed += 1
        elif outcome == "failed":
            self.failed += 1
        else:
            self.interrupted += 1
        if turn_id == self.last_id:
            self.last_outcome = outcome
            self.last_error = _shared(error)
            self.last_completed_at = completed_at

    def apply(self, record: object) -> bool:
        """Take the counted fields of one parsed line; returns whether it set tokens."""
        if not isinstance(record, dict):
            return False
        self.see_time(_pick_time(record.get("timestamp")))
        kind = record.get("type")
        payload = record.get("payload")
        if not isinstance(payload, dict):
            return False
        if kind == "event_msg":
            sub = payload.get("type")
            if sub == "task_started":
                self.turn_started(_pick_id(payload.get("turn_id")))
            elif sub == "task_complete":
                # Any non-null `error` is a failed turn, even one we cannot name.
                error = payload.get("error")
                self.turn_ended(
                    _pick_id(payload.get("turn_id")),
                    "completed" if error is None else "failed",
                    _pick_error_code(error),
                    _pick_int(payload.get("completed_at")),
                )
            elif sub == "turn_aborted":
                self.turn_ended(
                    _pick_id(payload.get("turn_id")),
                    "interrupted",
                    None,
                    _pick_int(payload.get("completed_at")),
                )
            elif sub == "token_count":
                info = payload.get("info")
                return isinstance(info, dict) and self.set_tokens(
                    _pick_tokens(info.get("total_token_usage"))
                )
        elif kind == "turn_context":
            model = _pick_model(payload.get("model"))
            self.add_model(model)
        elif kind == "token_usage_record":
            return self.set_tokens(_pick_tokens(payload.get("thread_token_usage")))
        elif kind == "session_meta" and not self.meta_seen:
            # Only the file's first session_meta names its thread (a fork may carry others).
            self.meta_seen = True
            self.thread_id = _pick_id(payload.get("id"))
            self.history_mode = _shared(_pick_kind(payload.get("history_mode")))
        return False

    def set_tokens(self, tokens: tuple[int, ...] | None) -> bool:
        """Take the thread's new totals (kept as the facts' own record); whether there were."""
        if tokens is None:
            return False
        self.tokens = TokenTotals(*tokens)
        return True

    def add_model(self, model: str | None) -> None:
        if model is not None and model not in self.models:
            self.models = _one_copy(tuple(sorted((*self.models, sys.intern(model)))))

    # -- index form ----------------------------------------------------------------------------

    def to_row(self) -> list[Any]:
        """The `_ROW` fields, in that order: flat, so the index parses fast and checks fast."""
        return [
            self.mode,
            self.meta_seen,
            self.thread_id,
            self.history_mode,
            self.started,
            self.completed,
            self.failed,
            self.interrupted,
            list(self.open_turns),
            self.last_id,
            self.last_outcome if self.last_id is not None else None,
            self.last_error if self.last_id is not None else None,
            self.last_completed_at if self.last_id is not None else None,
            [getattr(self.tokens, key) for key in _TOKEN_KEYS] if self.tokens is not None else None,
            list(self.models),
            self.latest,
        ]

    @classmethod
    def from_row(cls, row: list[Any], at: int) -> _Acc:
        """Rebuild from `row[at:]` (the `to_row` fields); any shape we did not write raises
        ValueError. Every check is a type test or one fullmatch: a CLI command loads a few
        thousand of these before it can answer."""
        (
            mode,
            meta,
            tid,
            hm,
            started,
            completed,
            failed,
            interrupted,
            open_turns,
            last_id,
            outcome,
            error,
            completed_at,
            tokens,
            models,
            latest,
        ) = row[at:]
        if mode not in _MODES or type(meta) is not bool:
            raise ValueError("mode")
        for count in (started, completed, failed, interrupted):
            if type(count) is not int or count < 0:
                raise ValueError("counts")
        if type(open_turns) is not list or type(models) is not list:
            raise ValueError("open turns or models")
        # Each string checked inline (type, then its pattern): no picker call per field.
        if tid is not None and (type(tid) is not str or _ID_OK(tid) is None):
            raise ValueError("thread id")
        if hm is not None and (type(hm) is not str or _KIND_OK(hm) is None):
            raise ValueError("history mode")
        if latest is not None and (type(latest) is not str or _TIME_OK(latest) is None):
            raise ValueError("time")
        for turn_id in open_turns:
            if type(turn_id) is not str or _ID_OK(turn_id) is None:
                raise ValueError("open turn")
        if last_id is not None:
            if type(last_id) is not str or _ID_OK(last_id) is None or outcome not in OUTCOMES:
                raise ValueError("last")
            if error is not None and (type(error) is not str or _KIND_OK(error) is None):
                raise ValueError("last error")
            if completed_at is not None and type(completed_at) is not int:
                raise ValueError("completed_at")
        elif outcome is not None or error is not None or completed_at is not None:
            raise ValueError("last")
        if tokens is not None:
            if type(tokens) is not list or len(tokens) != len(_TOKEN_KEYS):
                raise ValueError("tokens")
            # As picked from the rollout: any integer (codex's own counts are never negative).
            for count in tokens:
                if type(count) is not int:
                    raise ValueError("tokens")
            tokens = TokenTotals(*tokens)
        kept: list[str] = []
        for model in models:
            # A stored name must be one the picker returns for itself ("path-redacted" for a
            # path); names repeat across files, so each is checked once per process.
            if type(model) is not str or _kept_model(model) != model:
                raise ValueError("model")
            kept.append(sys.intern(model))
        acc = cls.__new__(cls)  # every slot is set below: no defaults to write first
        acc.mode = _MODE_FAST if mode == _MODE_FAST else _MODE_EXACT if mode else None
        acc.meta_seen = meta
        acc.thread_id = tid
        acc.history_mode = _shared(hm)
        acc.started = started
        acc.completed = completed
        acc.failed = failed
        acc.interrupted = interrupted
        acc.open_turns = tuple(open_turns)
        acc.last_id = last_id
        acc.last_outcome = _OUTCOME_OF.get(outcome)
        acc.last_error = _shared(error)
        acc.last_completed_at = completed_at
        acc.tokens = tokens
        acc.models = _one_copy(tuple(sorted(set(kept))))
        acc.latest = latest
        return acc

    @classmethod
    def from_facts(cls, facts: ThreadFacts, mode: str | None, meta_seen: bool, named: bool) -> _Acc:
        """The accumulator whose `facts` these are, for a file with no open turn (`to_row`
        gives back the same row): what a settled index entry keeps instead of it (`mode`,
        `meta_seen`, and `named`: whether the thread id came from the file's session_meta)."""
        acc = cls()
        acc.mode = mode
        acc.meta_seen = meta_seen
        acc.thread_id = facts.thread_id if named else None
        acc.history_mode = facts.history_mode
        turns = facts.turns
        acc.started, acc.completed = turns.started, turns.completed
        acc.failed, acc.interrupted = turns.failed, turns.interrupted
        last = facts.last_turn
        if last is not None:
            acc.last_id, acc.last_outcome = last.turn_id, last.outcome
            acc.last_error, acc.last_completed_at = last.error_code, last.completed_at
        acc.tokens = facts.tokens
        acc.models = facts.models
        acc.latest = facts.latest_event_at
        return acc

    def facts(self, thread_id: str, archived: bool) -> ThreadFacts:
        last = None
        if self.last_id is not None and self.last_outcome is not None:
            last = LastTurn(
                self.last_id, self.last_outcome, self.last_error, self.last_completed_at
            )
        # Positional, in field order: a scan builds one of these per thread, and keyword
        # passing costs a third more per dataclass.
        turns = _one_copy(
            TurnCounts(
                self.started, self.completed, self.failed, self.interrupted, len(self.open_turns)
            )
        )
        return ThreadFacts(
            thread_id,
            self.latest,
            turns,
            last,
            self.tokens,
            self.models,
            self.history_mode,
            archived,
        )
