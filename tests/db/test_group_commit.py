"""GroupCommits: groups that arrive while a commit runs share the next one, an idle writer is
committed at once, a failed commit raises in each of its callers only, and a caller that stops
waiting still has its group committed."""

from __future__ import annotations

import asyncio

import pytest

from app.db.group_commit import GroupCommits


class Log:
    """A commit that records what it was given and can be held open or made to fail."""

    def __init__(self) -> None:
        self.commits: list[list[str]] = []
        self.release = asyncio.Event()
        self.release.set()
        self.started = asyncio.Event()
        self.failing: set[str] = set()

    async def __call__(self, groups: list[str]) -> None:
        self.started.set()
        await self.release.wait()
        if self.failing & set(groups):
            raise RuntimeError("the database said no")
        self.commits.append(groups)


async def test_an_idle_writer_is_committed_at_once() -> None:
    log = Log()
    commits = GroupCommits(log)
    await commits.commit("a")
    await commits.commit("b")
    assert log.commits == [["a"], ["b"]]
    assert commits.commits == 2


async def test_groups_arriving_during_a_commit_share_the_next_one() -> None:
    log = Log()
    log.release.clear()
    commits = GroupCommits(log)
    first = asyncio.create_task(commits.commit("a"))
    await log.started.wait()  # "a" is being committed; the next three wait for it
    others = [asyncio.create_task(commits.commit(g)) for g in ("b", "c", "d")]
    await asyncio.sleep(0)
    assert not any(t.done() for t in [first, *others])
    log.release.set()
    await asyncio.gather(first, *others)
    assert log.commits == [["a"], ["b", "c", "d"]]


async def test_a_failed_commit_raises_in_its_callers_and_the_next_commit_goes_on() -> None:
    log = Log()
    log.release.clear()
    log.failing = {"c"}
    commits = GroupCommits(log)
    first = asyncio.create_task(commits.commit("a"))
    await log.started.wait()
    failed = [asyncio.create_task(commits.commit(g)) for g in ("b", "c")]
    await asyncio.sleep(0)
    log.release.set()
    await first
    for task in failed:
        with pytest.raises(RuntimeError, match="said no"):
            await task
    await commits.commit("e")
    assert log.commits == [["a"], ["e"]]


async def test_a_caller_that_stops_waiting_still_has_its_group_committed() -> None:
    log = Log()
    log.release.clear()
    commits = GroupCommits(log)
    first = asyncio.create_task(commits.commit("a"))
    await log.started.wait()
    gone = asyncio.create_task(commits.commit("b"))
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    log.release.set()
    await first
    await commits.commit("c")  # starts after "b"'s commit, which the cancel did not stop
    assert log.commits[:2] == [["a"], ["b"]]
    assert ["c"] in log.commits
