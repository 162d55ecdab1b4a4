"""A message step's best hour (FN-37): the contact's local hour with the most opens and clicks
(ties to the earlier hour, the last 90 days, at least three), falling back to the step's time;
quiet hours per contact zone still apply; the choice is recorded on the step."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from app.engines.funnels.events.claim.triggers import enroll
from app.engines.funnels.models import ContactEvent
from app.engines.funnels.sendtime.best_hour import best_hour, next_at_hour
from app.runtime import Runtime
from tests.engines.funnels.factories import (
    Engine,
    Space,
    contact,
    effects,
    email_node,
    graph,
    published,
    runs_of,
    space,
    steps_of,
)

__all__ = ["space"]

BERLIN = ZoneInfo("Europe/Berlin")


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


# February: Berlin is UTC+1. Three reactions at 07:xx local, two at 18:xx local.
HISTORY = [
    utc(2026, 2, 20, 6, 10),
    utc(2026, 2, 21, 6, 40),
    utc(2026, 2, 22, 17, 5),
    utc(2026, 2, 23, 17, 30),
    utc(2026, 2, 24, 6, 59),
]


def test_fn37_best_hour_is_the_local_hour_with_most_reactions() -> None:
    """FN-37, by hand: 07 local has 3 of 5 reactions (UTC 06:xx is 07:xx in Berlin)."""
    found = best_hour(HISTORY, BERLIN)
    assert found is not None
    assert (found.hour, found.at_that_hour, found.reactions) == (7, 3, 5)
    # The same moments read in UTC give UTC's hour: the zone is the contact's.
    utc_found = best_hour(HISTORY, ZoneInfo("UTC"))
    assert utc_found is not None
    assert utc_found.hour == 6


def test_fn37_ties_go_to_the_earlier_hour_and_little_history_gives_none() -> None:
    tie = [*HISTORY[:2], *HISTORY[2:4]]
    found = best_hour(tie, BERLIN)
    assert found is not None
    assert found.hour == 7
    assert best_hour(HISTORY[:2], BERLIN) is None


def test_fn37_next_at_hour_crosses_daylight_saving() -> None:
    """At 21:00 CET on 28 March, 07:00 next is on 29 March, after the clocks went forward:
    05:00 UTC, not 06:00."""
    assert next_at_hour(utc(2026, 3, 28, 20, 0), BERLIN, 7) == utc(2026, 3, 29, 5, 0)
    # Already that hour locally: now.
    assert next_at_hour(utc(2026, 3, 2, 6, 30), BERLIN, 7) == utc(2026, 3, 2, 6, 30)
    # Later today.
    assert next_at_hour(utc(2026, 3, 2, 4, 0), BERLIN, 7) == utc(2026, 3, 2, 6, 0)


async def _history(runtime: Runtime, ws: int, contact_id: int, moments: list[datetime]) -> None:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        for i, at in enumerate(moments):
            uow.session.add(
                ContactEvent(
                    workspace_id=ws,
                    contact_id=contact_id,
                    name="message_opened" if i % 2 == 0 else "link_clicked",
                    source="test",
                    properties={},
                    occurred_at=at,
                    created_at=now,
                    matched_at=now,
                )
            )


async def _run(engine: Engine, ws: int, definition: dict[str, object], ids: list[int]) -> int:
    rt = engine.runtime
    funnel_id, version = await published(rt, ws, definition)
    async with rt.db.write() as uow:
        await enroll(uow.session, version, now=rt.clock.now(), contact_ids=ids)
    await engine.drive(deliver=False)
    return funnel_id


async def test_fn37_send_step_waits_for_the_best_hour_and_records_it(
    engine: Engine, space: Space
) -> None:
    """FN-37: the step's message is held until the contact's best hour (07:00 Berlin, the next
    one after 10:00 local on 2 March is 3 March 06:00 UTC), recorded on the step; a contact
    without history gets it at the step's time."""
    rt, ws = engine.runtime, space.workspace_id
    reader = await contact(rt, ws, "reader@example.com", timezone="Europe/Berlin")
    newcomer = await contact(rt, ws, "new@example.com", timezone="Europe/Berlin")
    await _history(rt, ws, reader, HISTORY)
    # Older than 90 days: not counted (it would make 18:00 the best hour).
    await _history(rt, ws, reader, [utc(2025, 11, 1, 17, 0) + timedelta(days=i) for i in range(5)])
    funnel_id = await _run(
        engine,
        ws,
        graph(
            email_node("hello", subject="Hi", body="Hello.", best_hour=True),
            triggers=[{"kind": "manual"}],
        ),
        [reader, newcomer],
    )
    by_contact = {run.contact_id: run for run in await runs_of(rt, funnel_id)}
    [reader_step] = [s for s in await steps_of(rt, by_contact[reader].id) if s.node_id == "hello"]
    assert reader_step.output["send_time"]["best_hour"] == 7
    assert reader_step.output["send_time"]["at"] == "2026-03-03T06:00:00+00:00"
    assert "3 of 5 opens and clicks" in reader_step.output["send_time"]["basis"]
    assert reader_step.decision.startswith("held for the contact's best hour (07:00)")
    [newcomer_step] = [
        s for s in await steps_of(rt, by_contact[newcomer].id) if s.node_id == "hello"
    ]
    assert newcomer_step.output["send_time"]["best_hour"] is None
    assert newcomer_step.decision == "queued"
    held = {e.contact_id: e.next_attempt_at for e in await effects(rt)}
    assert held[reader] == utc(2026, 3, 3, 6, 0)
    assert held[newcomer] == rt.clock.now()


async def test_fn37_quiet_hours_per_contact_zone_still_apply(engine: Engine, space: Space) -> None:
    """FN-37/FN-20: a best hour inside the funnel's quiet hours (23:00 local, quiet 21-8) is held
    to the end of the quiet hours (08:00 local) like any message."""
    rt, ws = engine.runtime, space.workspace_id
    owl = await contact(rt, ws, "owl@example.com", timezone="Europe/Berlin")
    await _history(rt, ws, owl, [utc(2026, 2, d, 22, 15) for d in (10, 11, 12)])
    definition = graph(
        email_node("hello", subject="Hi", body="Hello.", best_hour=True),
        triggers=[{"kind": "manual"}],
    )
    definition["settings"] = {"quiet_start_hour": 21, "quiet_end_hour": 8}
    funnel_id = await _run(engine, ws, definition, [owl])
    [run] = await runs_of(rt, funnel_id)
    [step] = [s for s in await steps_of(rt, run.id) if s.node_id == "hello"]
    assert step.output["send_time"]["best_hour"] == 23
    assert step.decision.startswith("held for quiet hours until 2026-03-03T07:00:00+00:00")
    [effect] = await effects(rt)
    assert effect.next_attempt_at == utc(2026, 3, 3, 7, 0)


async def test_fn37_sms_best_hour_in_the_simulation(runtime: Runtime, space: Space) -> None:
    """FN-37: an SMS step honours the best hour too, and the simulator (FN-27), running the same
    executors, shows the message at that hour: 12:00 in Tokyo (03:00 UTC), the day after the
    contact entered at 18:00 local."""
    from app.engines.funnels.definitions.service import create_funnel, parse_definition
    from app.engines.funnels.definitions.simulate import simulate

    ws = space.workspace_id
    person = await contact(
        runtime, ws, "kenji@example.com", phone="+81312345678", timezone="Asia/Tokyo"
    )
    await _history(runtime, ws, person, [utc(2026, 2, d, 3, 20) for d in (3, 9, 15, 21)])
    definition = graph(
        {"kind": "send_sms", "id": "nudge", "text": "Hello", "best_hour": True},
        triggers=[{"kind": "manual"}],
    )
    async with runtime.db.write() as uow:
        funnel = await create_funnel(
            uow.session, ws, "SMS", parse_definition(definition), runtime.clock.now()
        )
    sim = await simulate(
        runtime.db,
        ws,
        funnel_id=funnel.id,
        contact_id=person,
        source="draft",
        start=runtime.clock.now(),
    )
    [message] = sim.messages
    assert message.channel == "sms"
    assert message.at == utc(2026, 3, 3, 3, 0)
    assert message.local_time == "Tue 2026-03-03 12:00 Asia/Tokyo"
    [step] = [s for s in sim.path if s.node_id == "nudge"]
    assert step.decision.startswith("held for the contact's best hour (12:00)")
