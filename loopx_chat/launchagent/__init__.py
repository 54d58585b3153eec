"""The macOS LaunchAgent that keeps `loopx-chat serve` running.

`plist` builds and parses plists (pure), `binding` decides which Codex home the agent is bound
to (pure), `launchctl` is the only code that runs launchctl, `installer` orchestrates them.
"""
