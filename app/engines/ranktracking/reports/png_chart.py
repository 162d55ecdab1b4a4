"""A small line chart drawn straight into PNG bytes, for e-mail reports.

Mail clients show neither scripts nor SVG reliably, so a report's chart travels as a PNG image.
The chart needs only straight lines on a plain grid, which a few dozen lines of pixel drawing do
without an imaging library; the PNG container is zlib-compressed scanlines with CRC'd chunks.
Text (axis figures, legend) stays in the HTML around the image, where it remains readable and
translatable.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

Colour = tuple[int, int, int]

BACKGROUND: Colour = (255, 255, 255)
GRID: Colour = (226, 230, 236)
AXIS: Colour = (120, 128, 140)
WIDTH = 560
HEIGHT = 220
MARGIN = 12
MAX_POINTS = 400
"""More points than pixels help no one; the report's period holds far fewer."""


@dataclass(frozen=True, slots=True)
class Series:
    """One line: ``values`` in time order, ``None`` where nothing was measured (a gap)."""

    colour: Colour
    values: Sequence[float | None]


class _Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray(bytes(BACKGROUND) * (width * height))

    def dot(self, x: int, y: int, colour: Colour) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            at = (y * self.width + x) * 3
            self.pixels[at : at + 3] = bytes(colour)

    def line(self, x0: int, y0: int, x1: int, y1: int, colour: Colour, thick: int = 1) -> None:
        """Bresenham's line, widened by drawing it again one pixel below per extra thickness."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            for t in range(thick):
                self.dot(x0, y0 + t, colour)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def square(self, x: int, y: int, colour: Colour, half: int = 2) -> None:
        for i in range(-half, half + 1):
            for j in range(-half, half + 1):
                self.dot(x + i, y + j, colour)

    def png(self) -> bytes:
        rows = b"".join(
            b"\x00" + bytes(self.pixels[y * self.width * 3 : (y + 1) * self.width * 3])
            for y in range(self.height)
        )
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(rows, 9))
            + _chunk(b"IEND", b"")
        )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def line_chart(
    series: Sequence[Series],
    *,
    low: float,
    high: float,
    inverted: bool = False,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> bytes:
    """A PNG of ``series`` on a shared x axis (point index) and the value range ``low``–``high``.

    ``inverted`` puts ``low`` at the top, as rank charts do (position 1 is the best). A single
    point is drawn as a marker; gaps (``None``) break the line rather than bridging it."""
    if high <= low:
        high = low + 1
    canvas = _Canvas(width, height)
    left, right, top, bottom = MARGIN, width - MARGIN - 1, MARGIN, height - MARGIN - 1
    for step in range(5):
        y = top + (bottom - top) * step // 4
        canvas.line(left, y, right, y, GRID)
    canvas.line(left, top, left, bottom, AXIS)
    canvas.line(left, bottom, right, bottom, AXIS)
    count = min(max((len(s.values) for s in series), default=0), MAX_POINTS)

    def x_of(index: int) -> int:
        return (
            left + (right - left) // 2
            if count == 1
            else left + (right - left) * index // (count - 1)
        )

    def y_of(value: float) -> int:
        share = (min(max(value, low), high) - low) / (high - low)
        return top + round((share if inverted else 1 - share) * (bottom - top))

    for s in series:
        previous: tuple[int, int] | None = None
        for index, value in enumerate(s.values[:count]):
            if value is None:
                previous = None
                continue
            point = (x_of(index), y_of(value))
            canvas.square(*point, s.colour)
            if previous is not None:
                canvas.line(*previous, *point, s.colour, thick=2)
            previous = point
    return canvas.png()
