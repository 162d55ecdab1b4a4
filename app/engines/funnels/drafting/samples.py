"""A drafted funnel walked by sample contacts (FN-35): twenty made-up people in five time zones,
half of them with a phone number, each put through the draft by the simulator (FN-27) on a
simulated clock. The people and whatever the walk wrote exist only inside a savepoint that is
always rolled back: no contact, tag, run or outbox row remains, and no message leaves.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.db.session import UnitOfWork
from app.engines.funnels.definitions.simulate import Simulation, walk_in
from app.engines.funnels.models import Contact

SAMPLE_SIZE = 20
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney")
NAMES = ("Ada", "Bruno", "Chiara", "Dmitri", "Emeka", "Fatima", "Goran", "Hana", "Ines", "Jonas")


class _RollBack(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    timezone: str
    phone: str | None


def samples(count: int = SAMPLE_SIZE) -> list[Sample]:
    """The same people every time, so two drafts' simulations compare."""
    return [
        Sample(
            name=f"{NAMES[i % len(NAMES)]} Sample{i + 1:02d}",
            timezone=ZONES[i % len(ZONES)],
            phone=f"+4915100000{i:03d}" if i % 2 == 0 else None,
        )
        for i in range(count)
    ]


async def simulate_samples(
    uow: UnitOfWork, workspace_id: int, funnel_id: int, *, start: datetime
) -> dict[str, Any]:
    """Walk every sample through the funnel's draft; the summary the draft record keeps."""
    results: list[tuple[Sample, Simulation]] = []
    try:
        async with uow.attempt():
            for i, sample in enumerate(samples()):
                first, _, last = sample.name.partition(" ")
                person = Contact(
                    workspace_id=workspace_id,
                    email=f"sample-{i + 1:02d}@example.invalid",
                    phone=sample.phone,
                    first_name=first,
                    last_name=last,
                    timezone=sample.timezone,
                    fields={},
                    consent={},
                    suppressed={},
                    created_at=start,
                    updated_at=start,
                )
                uow.session.add(person)
                await uow.session.flush()
                walked = await walk_in(
                    uow.session,
                    workspace_id,
                    funnel_id=funnel_id,
                    contact_id=person.id,
                    start=start,
                )
                results.append((sample, walked))
            raise _RollBack
    except _RollBack:
        pass
    return summary(results, start)


def summary(results: list[tuple[Sample, Simulation]], start: datetime) -> dict[str, Any]:
    outcomes: dict[str, int] = {}
    for _, sim in results:
        outcomes[sim.outcome] = outcomes.get(sim.outcome, 0) + 1
    return {
        "started_at": start.isoformat(),
        "contacts": len(results),
        "entered": sum(1 for _, sim in results if sim.entered),
        "messages": sum(len(sim.messages) for _, sim in results),
        "outcomes": outcomes,
        "samples": [
            {
                "name": sample.name,
                "timezone": sample.timezone,
                "phone": sample.phone is not None,
                "outcome": sim.outcome,
                "path": [step.node_id for step in sim.path],
                "messages": [
                    {"node_id": m.node_id, "channel": m.channel, "local_time": m.local_time}
                    for m in sim.messages
                ],
            }
            for sample, sim in results
        ],
    }
