#!/usr/bin/env bash
# Install the Debian tools the tests use as independent checkers, where apt is available:
# plistutil (libplist-utils) parses generated plists with a second, non-Python parser;
# chromium renders the service's first-screen page headless; zsh and dash are the real shells
# the LaunchAgent decoder is checked against (bash is always there); caddy is the owner's
# reverse proxy with TLS in front of `serve --public-url` (its internal CA), and zbarimg
# (zbar-tools) decodes the QR code `pair` prints.
# Without apt (macOS, a non-root shell) it only says what is missing; the tests that need a
# tool then skip locally and fail under CI.
set -u
missing=()
command -v plistutil >/dev/null 2>&1 || missing+=(libplist-utils)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v zsh >/dev/null 2>&1 || missing+=(zsh)
command -v dash >/dev/null 2>&1 || missing+=(dash)
command -v caddy >/dev/null 2>&1 || missing+=(caddy)
command -v zbarimg >/dev/null 2>&1 || missing+=(zbar-tools)
[ ${#missing[@]} -eq 0 ] && exit 0
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "${missing[@]}" >/dev/null; }
else
  echo "note: missing ${missing[*]} (no apt as root here); tests needing them skip outside CI" >&2
fi
exit 0
