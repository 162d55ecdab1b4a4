"""A task working through many items gives the loop's other tasks their turn (app/event_loop.py)."""

from __future__ import annotations

from app.event_loop import Turns
from tests.other_task import OtherTask


async def _turns_seen(turns: Turns, items: int) -> list[int]:
    """How many turns another task had had when each item came up."""
    seen = []
    async with OtherTask() as other:
        for _ in range(items):
            await turns.give_way()
            seen.append(other.turns)
    return seen


async def test_once_its_turn_is_over_the_others_run_between_items() -> None:
    seen = await _turns_seen(Turns(0), 4)
    assert seen == sorted(set(seen))  # the other task ran before every item


async def test_within_its_turn_it_keeps_the_loop() -> None:
    seen = await _turns_seen(Turns(60), 4)
    assert len(set(seen)) == 1
