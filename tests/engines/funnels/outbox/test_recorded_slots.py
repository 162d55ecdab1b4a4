"""Send slots prepare their next message while the previous outcome's commit runs, and deliver
it only once that commit is done: at most one delivered, unrecorded message per slot."""

from __future__ import annotations

import asyncio

import pytest

from app.engines.funnels.outbox.work.recorded_slots import Ready, send_and_record


class Journal:
    """What happened, in order: prepare n, deliver n, abort n, commit [..]."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.commit_may_end = asyncio.Event()
        self.commit_started = asyncio.Event()

    async def prepare(self, n: int) -> Ready[int]:
        self.events.append(f"prepare {n}")
        return _Message(self, n)

    async def record(self, group: list[int]) -> bool:
        self.events.append(f"commit {group}")
        self.commit_started.set()
        await self.commit_may_end.wait()
        return True


class _Message:
    def __init__(self, journal: Journal, n: int) -> None:
        self.journal, self.n = journal, n

    async def complete(self) -> int:
        self.journal.events.append(f"deliver {self.n}")
        return self.n

    def abort(self) -> None:
        self.journal.events.append(f"abort {self.n}")


async def test_the_next_message_is_prepared_during_the_commit_and_delivered_after_it() -> None:
    journal = Journal()
    sending = asyncio.create_task(
        send_and_record([1, 2], slots=1, prepare=journal.prepare, record=journal.record)
    )
    await journal.commit_started.wait()
    await asyncio.sleep(0.05)
    # Message 2 is ready while message 1's outcome commits, but not delivered.
    assert journal.events[:2] == ["prepare 1", "deliver 1"]
    assert sorted(journal.events[2:]) == ["commit [1]", "prepare 2"]
    journal.commit_may_end.set()
    assert await sending is True
    assert journal.events[4:] == ["deliver 2", "commit [2]"]


async def test_a_lost_lease_aborts_the_prepared_message() -> None:
    journal = Journal()

    async def lost(group: list[int]) -> bool:
        journal.events.append(f"commit {group}")
        return False

    assert await send_and_record([1, 2, 3], slots=1, prepare=journal.prepare, record=lost) is False
    assert journal.events[:2] == ["prepare 1", "deliver 1"]
    assert sorted(journal.events[2:4]) == ["commit [1]", "prepare 2"]
    assert journal.events[4:] == ["abort 2"]  # never delivered; message 3 never started


async def test_a_cancelled_sender_aborts_the_prepared_message_and_records_the_delivered_one() -> (
    None
):
    journal = Journal()
    sending = asyncio.create_task(
        send_and_record([1, 2], slots=1, prepare=journal.prepare, record=journal.record)
    )
    await journal.commit_started.wait()
    await asyncio.sleep(0.05)
    sending.cancel()
    await asyncio.sleep(0.05)
    journal.commit_may_end.set()
    with pytest.raises(asyncio.CancelledError):
        await sending
    assert "abort 2" in journal.events
    assert "deliver 2" not in journal.events


async def test_several_slots_never_have_more_than_one_delivered_unrecorded_message_each() -> None:
    slots, delivered, recorded, worst = 3, set[int](), set[int](), 0

    class Counted:
        def __init__(self, n: int) -> None:
            self.n = n

        async def complete(self) -> int:
            nonlocal worst
            delivered.add(self.n)
            worst = max(worst, len(delivered - recorded))
            await asyncio.sleep(0.001 * (self.n % 3))
            return self.n

        def abort(self) -> None:
            raise AssertionError("nothing is aborted")

    async def prepare(n: int) -> Ready[int]:
        await asyncio.sleep(0)
        return Counted(n)

    async def record(group: list[int]) -> bool:
        await asyncio.sleep(0.002)
        recorded.update(group)
        return True

    assert await send_and_record(range(60), slots=slots, prepare=prepare, record=record)
    assert recorded == set(range(60))
    assert 1 <= worst <= slots


@pytest.mark.parametrize("ending", ["record fails", "cancelled"])
async def test_the_shared_slot_gate_gets_every_permit_back(ending: str) -> None:
    """A process's deliverer jobs share one gate: a job whose recorder failed or that was
    cancelled must not keep permits, or the process's sending would stall for good."""
    gate = asyncio.Semaphore(2)
    journal = Journal()

    async def failing(group: list[int]) -> bool:
        await asyncio.sleep(0.01)
        raise RuntimeError("database gone")

    async def then_unreadable(n: int) -> Ready[int]:
        if n >= 1:  # the slot stops after its first message, that one's commit not yet answered
            raise ValueError("unreadable")
        return await journal.prepare(n)

    failed = ending == "record fails"
    sending = asyncio.create_task(
        send_and_record(
            range(5),
            slots=1 if failed else 2,
            prepare=then_unreadable if failed else journal.prepare,
            record=failing if failed else journal.record,
            slot_gate=gate,
        )
    )
    if not failed:
        await journal.commit_started.wait()
        sending.cancel()
        await asyncio.sleep(0.01)
        journal.commit_may_end.set()
    with pytest.raises((RuntimeError, asyncio.CancelledError)):
        await sending
    # Both permits can be taken again (a leaked one would make this time out).
    await asyncio.wait_for(asyncio.gather(gate.acquire(), gate.acquire()), timeout=1)
