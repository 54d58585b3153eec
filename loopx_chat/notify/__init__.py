"""Telling the owner: desktop notices (osascript, notify-send) and an opt-in signed webhook.

An adapter room (floor 3): it may spawn `osascript` / `notify-send` (argv only, never a
shell) and POST to the one webhook URL the owner named. What it sends is public-safe text
only: the goal id, the gate kind in words and the page URL (never the owner's secret). It
never reads goal or session state, never decides which goal needs the owner (the service
does), and never blocks its caller: every channel runs on its own worker thread.
"""
