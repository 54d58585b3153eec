"""The Linux systemd user service that keeps `loopx-chat serve` running (`loopx-chat service`).

`unit` writes and reads the units (pure), `binding` decides which Codex home the service is
bound to (pure), `systemctl` is the only code that runs `systemctl --user`, `installer`
orchestrates them. It never writes a user's drop-in and never runs what a unit says.
"""
