"""state/used_table.py: what a process keeps per key is kept while used, then only for the
most recently used idle keys."""

from __future__ import annotations

from loopx_chat.state.used_table import UsedTable


def test_a_value_in_use_is_kept_and_the_least_recently_used_idle_one_goes() -> None:
    table: UsedTable[object] = UsedTable(object, keep_idle=2)
    with table.using("busy") as busy:
        for key in ("a", "b", "c"):
            with table.using(key):
                pass
        # "a" was the least recently used idle key: forgotten; the one in use never is.
        assert table.get("a") is None and table.get("busy") is busy
        assert len(table) == 3  # busy, b, c
        with table.using("b"):  # "b" used again: now "c" is the older idle one
            pass
        with table.using("d"):
            pass
        assert table.get("c") is None and table.get("b") is not None
    # "busy" went idle as the most recent: the oldest idle key makes room for it.
    assert len(table) == 2 and table.get("busy") is busy


def test_nested_use_keeps_one_value_and_a_forgotten_key_gets_a_new_one() -> None:
    table: UsedTable[object] = UsedTable(object, keep_idle=0)
    with table.using("k") as outer, table.using("k") as inner:
        assert inner is outer
    assert len(table) == 0
    with table.using("k") as again:
        assert again is not outer
