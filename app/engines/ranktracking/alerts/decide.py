"""Which keywords fire a rule: pure functions of two measurements of the same device.

A movement compares a keyword's position in a request's run with the same device's previous
measured run. Only keywords the provider answered in both runs count ("no data" and failures are
neither an entry nor an exit); ``None`` is "not within the requested depth".

- ``enters_top`` N: not in the top N before (or beyond the depth), in it now;
- ``leaves_top`` N: in the top N before, not now (lower, or beyond the depth);
- ``moves`` K: ranked in both runs and moved by at least K places, up or down.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.engines.ranktracking.wording import counted


@dataclass(frozen=True, slots=True)
class Movement:
    keyword: str
    device: str
    previous: int | None
    current: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "keyword": self.keyword,
            "device": self.device,
            "previous": self.previous,
            "current": self.current,
        }


def _in_top(position: int | None, n: int) -> bool:
    return position is not None and position <= n


def fires(kind: str, threshold: int, movement: Movement) -> bool:
    before, now = movement.previous, movement.current
    if kind == "enters_top":
        return _in_top(now, threshold) and not _in_top(before, threshold)
    if kind == "leaves_top":
        return _in_top(before, threshold) and not _in_top(now, threshold)
    if kind == "moves":
        return before is not None and now is not None and abs(before - now) >= threshold
    raise ValueError(f"unknown alert kind {kind!r}")


def matching(
    kind: str, threshold: int, device: str | None, movements: list[Movement]
) -> list[Movement]:
    """The movements that fire the rule, by keyword then device."""
    return sorted(
        (
            m
            for m in movements
            if (device is None or m.device == device) and fires(kind, threshold, m)
        ),
        key=lambda m: (m.keyword, m.device),
    )


def describe(kind: str, threshold: int, count: int = 1) -> str:
    """The rule as a verb phrase agreeing with ``count`` keywords: "enters the top 3" for one,
    "enter the top 3" for several."""
    one = count == 1
    if kind == "enters_top":
        return f"{'enters' if one else 'enter'} the top {threshold}"
    if kind == "leaves_top":
        return f"{'leaves' if one else 'leave'} the top {threshold}"
    return (
        f"{'moves' if one else 'move'} by {threshold} place{'s' if threshold != 1 else ''} or more"
    )


def keywords(count: int) -> str:
    """``1 keyword``, ``2 keywords``."""
    return counted(count, "keyword")


def line(movement: Movement) -> str:
    """``red shoes (mobile): 6 → 1`` (``–`` for beyond the depth)."""

    def shown(p: int | None) -> str:
        return str(p) if p is not None else "–"

    return f"{movement.keyword} ({movement.device}): {shown(movement.previous)} → {shown(movement.current)}"
