"""The QR code of a pairing URL, drawn three ways from one encoder (segno, pure Python):
half-block text for the owner's terminal (`loopx-chat pair`), PNG bytes (`pair --png`) and an
SVG document for the desk's page ("Pair a phone"). Pure: a URL in, text or bytes out.

segno is imported on first use only, so neither the CLI's start nor the service's pays for it
until a code is drawn. It never writes, logs or keeps the URL (which carries a one-time code).
"""

from __future__ import annotations

import io
from typing import Any

# Light modules drawn, with a quiet zone: what a phone's camera reads on a dark or light
# terminal; medium error correction for a photo of a screen.
QR_ERROR = "m"
TERMINAL_BORDER = 2
IMAGE_BORDER = 4
PNG_SCALE = 8
SVG_SCALE = 5


def _code(url: str) -> Any:
    import segno

    return segno.make(url, error=QR_ERROR, micro=False)


def qr_text(url: str) -> str:
    """Two rows of modules per line in half-block characters, for a terminal."""
    out = io.StringIO()
    _code(url).terminal(out=out, compact=True, border=TERMINAL_BORDER)
    return out.getvalue()


def qr_png(url: str) -> bytes:
    out = io.BytesIO()
    _code(url).save(out, kind="png", scale=PNG_SCALE, border=IMAGE_BORDER)
    return out.getvalue()


def qr_svg(url: str) -> str:
    """One `<svg>` element (no XML declaration, no script, no link), black on white."""
    out = io.BytesIO()
    _code(url).save(
        out,
        kind="svg",
        scale=SVG_SCALE,
        border=IMAGE_BORDER,
        xmldecl=False,
        svgns=True,
        nl=False,
        dark="#000",
        light="#fff",
        svgclass="qr",
        lineclass=None,
    )
    return out.getvalue().decode("ascii")
