"""A task working through many items gives the loop's other tasks their turn (app/event_loop.py)."""

from __future__ import annotations

import asyncio

from app.event_loop import Turns


async def _others_ran(turns: Turns, items: int) -> list[int]:
    """How many turns a sibling task had had when each item came up."""
    ticks = 0

    async def sibling() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    running = asyncio.create_task(sibling())
    await asyncio.sleep(0)
    seen = []
    for _ in range(items):
        await turns.give_way()
        seen.append(ticks)
    running.cancel()
    return seen


async def test_once_its_turn_is_over_the_others_run_between_items() -> None:
    seen = await _others_ran(Turns(0), 4)
    assert seen == sorted(set(seen))  # the sibling ran before every item


async def test_within_its_turn_it_keeps_the_loop() -> None:
    seen = await _others_ran(Turns(60), 4)
    assert len(set(seen)) == 1
