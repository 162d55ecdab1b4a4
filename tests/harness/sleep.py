"""The one sleep tests hand to code that waits between attempts: it records each wait and
returns at once, so a retry schedule is read from ``waits`` instead of waited out."""

from __future__ import annotations


class RecordingSleep:
    """An injectable sleep that records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
