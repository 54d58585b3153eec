"""One test per rule of the controlled-writeback document validator, with the exact problem.

The document's shape is written here from the reference (`loopx-behaviour.md` §5, "Minimal
shape"), not read from the module's tables; each rule's test asserts the whole problem list
(`"<code>: <path>"`), so a rule that fires on the wrong field, fires twice or stays silent
fails. The idempotency key follows the reference's `<goal>:<run>:<write_class>`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from loopx_chat.session_runtime import validate_writeback_document
from tests.helpers.writeback import HANDOFF

# The minimal shape from the reference, with values the handoff class allows.
SECTIONS: dict[str, tuple[str, ...]] = {
    "runtime": ("runtime_id", "session_id"),
    "loopx_source": ("source_run_id", "source_todo_id", "source_event_class"),
    "writeback": ("write_class", "mode", "idempotency_key", "payload"),
    "boundary": (
        "raw_transcripts_copied",
        "raw_tool_outputs_copied",
        "credentials_copied",
        "private_paths_copied",
        "launch_authority_granted",
    ),
    "result": ("status", "runtime_event_id", "loopx_writeback_run_id"),
}
TOP_LEVEL = ("schema_version", "goal_id", "agent_id", *SECTIONS)


def document() -> dict[str, Any]:
    return {
        "schema_version": "session_runtime_controlled_writeback_v0",
        "goal_id": "loopx-meta",
        "agent_id": "codex",
        "runtime": {"runtime_id": "codex_app_server", "session_id": "sess-1"},
        "loopx_source": {
            "source_run_id": "run_123",
            "source_todo_id": "todo_123",
            "source_event_class": "handoff_packet",
        },
        "writeback": {
            "write_class": "handoff_packet_pointer",
            "mode": "dry_run",
            "idempotency_key": "loopx-meta:run_123:handoff_packet_pointer",
            "payload": dict(HANDOFF),
        },
        "boundary": dict.fromkeys(SECTIONS["boundary"], False),
        "result": {"status": "previewed", "runtime_event_id": None, "loopx_writeback_run_id": None},
    }


def _at(doc: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node[part]
    return node, last


def put(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node, last = _at(doc, path)
        node[last] = value

    return change


def drop(path: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node, last = _at(doc, path)
        del node[last]

    return change


def problems_after(*changes: Callable[[dict[str, Any]], None]) -> list[str]:
    doc = document()
    for change in changes:
        change(doc)
    return validate_writeback_document(doc)


KEY = "writeback.idempotency_key"
INCONSISTENT_KEY = f"inconsistent_idempotency_key: {KEY}"


def test_the_reference_shape_is_valid_in_both_modes() -> None:
    assert problems_after() == []
    assert problems_after(put("writeback.mode", "apply")) == []


def test_anything_but_an_object_is_one_problem() -> None:
    for value in (None, [], "doc", 3, ["schema_version"]):
        assert validate_writeback_document(value) == ["not_an_object: <document>"]


# Removing a field can also cost what depends on it: the key names the goal and the run, and
# the source event must match the class.
LOST_WITH: dict[str, list[str]] = {
    "goal_id": [INCONSISTENT_KEY],
    "loopx_source": ["source_event_mismatch: loopx_source.source_event_class", INCONSISTENT_KEY],
}


@pytest.mark.parametrize("field", TOP_LEVEL)
def test_each_top_level_field_is_required(field: str) -> None:
    assert problems_after(drop(field)) == [f"missing_field: {field}", *LOST_WITH.get(field, [])]


@pytest.mark.parametrize(
    ("section", "field"), [(s, f) for s, fields in SECTIONS.items() for f in fields]
)
def test_each_section_field_is_required_and_no_other_is_allowed(section: str, field: str) -> None:
    missing = problems_after(drop(f"{section}.{field}"))
    assert missing[0] == f"missing_field: {section}.{field}"
    extra = problems_after(put(f"{section}.{field}_extra", False))
    assert extra == [f"unknown_field: {section}.{field}_extra"]


def test_an_unknown_top_level_field_is_named() -> None:
    assert problems_after(put("priority", 1)) == ["unknown_field: priority"]


@pytest.mark.parametrize("section", list(SECTIONS))
def test_a_section_that_is_not_an_object_is_invalid_and_not_read_further(section: str) -> None:
    assert problems_after(put(section, ["not", "an", "object"])) == [
        f"invalid_section: {section}",
        *(LOST_WITH[section] if section == "loopx_source" else []),
    ]


def test_the_schema_version_must_be_v0() -> None:
    assert problems_after(put("schema_version", "session_runtime_controlled_writeback_v1")) == [
        "wrong_schema_version: schema_version"
    ]


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("goal_id", [INCONSISTENT_KEY]),
        ("agent_id", []),
        ("runtime.runtime_id", []),
        ("runtime.session_id", []),
        ("loopx_source.source_run_id", [INCONSISTENT_KEY]),
        ("loopx_source.source_todo_id", []),
        ("loopx_source.source_event_class", []),
    ],
)
def test_each_id_must_be_an_identity(path: str, extra: list[str]) -> None:
    for bad in ("a goal", "/home/bob/x/", "", 7):
        assert problems_after(put(path, bad)) == [f"invalid_id: {path}", *extra], bad


def test_source_needs_a_run_or_a_todo_and_the_key_follows_whichever_there_is() -> None:
    none = put("loopx_source.source_run_id", None), put("loopx_source.source_todo_id", None)
    assert problems_after(*none) == [
        "missing_source_id: loopx_source (a run id or a todo id)",
        INCONSISTENT_KEY,
    ]
    todo_only = put("loopx_source.source_run_id", None)
    assert problems_after(todo_only) == [INCONSISTENT_KEY]  # the key still names the run
    todo_key = put(KEY, "loopx-meta:todo_123:handoff_packet_pointer")
    assert problems_after(todo_only, todo_key) == []
    assert problems_after(put("loopx_source.source_todo_id", None)) == []


def test_write_class_and_mode_are_closed_enums() -> None:
    for bad in ("shell_exec", 3, None):
        assert problems_after(put("writeback.write_class", bad)) == [
            "unknown_enum: writeback.write_class",
            INCONSISTENT_KEY,
        ]
    assert problems_after(put("writeback.mode", "force_apply")) == ["unknown_enum: writeback.mode"]


def test_the_source_event_must_match_the_write_class() -> None:
    assert problems_after(put("loopx_source.source_event_class", "quota_decision")) == [
        "source_event_mismatch: loopx_source.source_event_class"
    ]
    # Another class with its own source event and key is fine as a pair.
    quota = (
        put("writeback.write_class", "quota_decision_hint"),
        put("loopx_source.source_event_class", "quota_decision"),
        put(KEY, "loopx-meta:run_123:quota_decision_hint"),
        put(
            "writeback.payload",
            {"hint": "monitor_quiet_skip", "window_id": "win_1", "reason_code": "quiet"},
        ),
    )
    assert problems_after(*quota) == []


def test_the_payload_is_checked_for_the_class() -> None:
    assert problems_after(put("writeback.payload.extra", "x")) == [
        "unknown_payload_key: writeback.payload (extra)"
    ]
    unsafe = problems_after(put("writeback.payload.next_action", "/Users/alice/x/"))
    assert unsafe == ["unsafe_payload: writeback.payload (next_action)"]
    assert "alice" not in " ".join(unsafe)


def test_the_key_is_goal_run_class() -> None:
    for bad in (
        "x",
        "loopx-meta:run_123:artifact_pointer",
        "loopx-meta:run_124:handoff_packet_pointer",
    ):
        assert problems_after(put(KEY, bad)) == [INCONSISTENT_KEY]


@pytest.mark.parametrize("flag", SECTIONS["boundary"])
def test_each_boundary_flag_must_be_false_exactly(flag: str) -> None:
    for value in (True, "false", 0, None):
        assert problems_after(put(f"boundary.{flag}", value)) == [
            f"boundary_flag_not_false: boundary.{flag}"
        ]


def test_result_status_and_ids() -> None:
    for status in ("previewed", "applied", "skipped", "rejected", "failed"):
        assert problems_after(put("result.status", status)) == [], status
    assert problems_after(put("result.status", "approved")) == ["unknown_enum: result.status"]
    for name in ("runtime_event_id", "loopx_writeback_run_id"):
        assert problems_after(put(f"result.{name}", "evt_1")) == []
        assert problems_after(put(f"result.{name}", "evt with spaces")) == [
            f"invalid_id: result.{name}"
        ]


def test_the_validator_never_changes_the_document() -> None:
    doc = document()
    doc["writeback"]["payload"]["next_action"] = "/Users/alice/x/"
    before = copy.deepcopy(doc)
    validate_writeback_document(doc)
    assert doc == before


def test_no_key_is_consistent_without_a_known_class_and_a_run_or_todo() -> None:
    # Even a key spelled from the missing part ("None") is refused: there is nothing to match.
    unknown_class = put("writeback.write_class", "shell_exec")
    assert problems_after(unknown_class, put(KEY, "loopx-meta:run_123:None")) == [
        "unknown_enum: writeback.write_class",
        INCONSISTENT_KEY,
    ]
    no_source = put("loopx_source.source_run_id", None), put("loopx_source.source_todo_id", None)
    assert problems_after(*no_source, put(KEY, "loopx-meta:None:handoff_packet_pointer")) == [
        "missing_source_id: loopx_source (a run id or a todo id)",
        INCONSISTENT_KEY,
    ]
