"""loopx-chat: a local control plane beside the Codex agent host.

Owns the package version and nothing else; importing the package must stay cheap and
side-effect free (no I/O, no environment reads).
"""

__version__ = "0.1.0"
