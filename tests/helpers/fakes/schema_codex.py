#!/usr/bin/env python3
"""Test-only codex for `home check`: another release's `--version` and protocol schema.

What this script owns, chosen by environment:
  * ``codex --version``: ``codex-cli $FAKE_CODEX_VERSION``;
  * ``codex app-server generate-json-schema [--experimental] --out DIR``: the schema recorded
    from a real release (``$FAKE_CODEX_SCHEMA``, a folder of tests/fixtures/codex-schema/,
    written by tools/record-codex-schema) with the methods in ``$FAKE_CODEX_REMOVE``
    (comma-separated) taken out; without ``$FAKE_CODEX_SCHEMA`` it runs the real codex
    ``$FAKE_CODEX_REAL`` for the schema, so a "newer" codex is the real one with another
    version;
  * each run appends its argv as one JSON line to ``$FAKE_CODEX_LOG`` when set.

What it must never do: write a schema of its own (every method comes from a recording or the
real binary), talk to the network, or touch files but DIR and the log.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    log = os.environ.get("FAKE_CODEX_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"argv": argv}) + "\n")
    if argv == ["--version"]:
        print(f"codex-cli {os.environ['FAKE_CODEX_VERSION']}")
        return 0
    if argv[:2] != ["app-server", "generate-json-schema"] or "--out" not in argv:
        print(f"schema_codex: unsupported {argv[:2]}", file=sys.stderr)
        return 2
    recorded = os.environ.get("FAKE_CODEX_SCHEMA")
    if not recorded:
        os.execv(os.environ["FAKE_CODEX_REAL"], [os.environ["FAKE_CODEX_REAL"], *argv])
    out = Path(argv[argv.index("--out") + 1])
    surface = "experimental" if "--experimental" in argv else "stable"
    removed = set(filter(None, os.environ.get("FAKE_CODEX_REMOVE", "").split(",")))
    out.mkdir(parents=True, exist_ok=True)
    for source in sorted((Path(recorded) / surface).glob("*.json.gz")):
        doc = json.loads(gzip.decompress(source.read_bytes()))
        doc["oneOf"] = [v for v in doc.get("oneOf", []) if not set(_methods(v)) & removed]
        (out / source.name.removesuffix(".gz")).write_text(json.dumps(doc))
    return 0


def _methods(variant: dict) -> list[str]:
    method = variant.get("properties", {}).get("method", {})
    return method.get("enum") or ([method["const"]] if "const" in method else [])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
