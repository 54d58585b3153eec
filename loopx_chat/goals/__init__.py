"""Goal-level control records and the pure decisions over them.

`gate_store` keeps owner gates and handoff packets (and each goal's folder and lock),
`goal_ledger` the goal_state, stop/resume, human rewards and dreaming proposals, `quota`
decides (and records) whether the goal may spend its next automatic turn, `reconcile` and
`metrics` are pure rules over compact facts, `goal_facts` turns owner-local state into the
projection's inputs and `status` builds the status document. Nothing here spawns a process
or talks to Codex.
"""
