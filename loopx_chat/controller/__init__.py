"""Driving Codex threads on the pinned home, and what reaches the host through it.

`chat_controller` is the controller (home check, single writer, turns), `warm_threads`
keeps threads loaded between turns, `thread_lock` is the per-thread writer lock across
processes, `home_ownership` tells ordinary use of a home from exclusive use, `turn_ledger`
writes the compact turn records around a turn, `goal_target` reads and sets a thread's goal,
and `host_writeback` is the controlled writeback flow onto it.
"""
