"""QR codes drawn on the server as inline SVG (segno): the enrolment secret never leaves the
instance for an outside QR service, and the page needs no script to show it."""

from __future__ import annotations

import segno
from markupsafe import Markup


def qr_svg(data: str, *, title: str) -> Markup:
    """An ``<svg>`` element for ``data``, safe to place in a template as it is."""
    code = segno.make(data, error="m")
    svg: str = code.svg_inline(
        scale=5, border=4, dark="#000", light="#fff", title=title, svgclass="qr", lineclass=None
    )
    # role=img with its <title>: screen readers announce one picture, not hundreds of paths.
    svg = svg.replace("<svg ", '<svg role="img" ', 1)
    return Markup(svg)  # noqa: S704 - segno's own markup; it escapes the title
