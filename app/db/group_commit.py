"""Commits shared by a process's writers: what arrives while a commit runs goes in the next one.

Several tasks of one process that each commit small groups (the deliverer's batches, each
recording the outcomes of its own send slots) pay a transaction — a round trip, a WAL flush —
per group, however few rows it holds. :class:`GroupCommits` takes their groups instead and
commits together every group that arrived while the previous commit ran, without ever waiting
to gather more: an idle writer's group is committed at once, a busy process's groups share
commits. Each caller returns when the commit that holds its group has ended, and raises what
that commit raised.

A caller cancelled while it waits does not take its group back: the group is committed with the
others (what was sent must still be recorded), only the caller stops waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class GroupCommits(Generic[T]):
    """Hands every group that arrived since the last commit to ``commit`` in one call."""

    def __init__(self, commit: Callable[[list[T]], Awaitable[None]]) -> None:
        self._commit = commit
        self._waiting: list[tuple[T, asyncio.Future[None]]] = []
        self._committing: asyncio.Task[None] | None = None
        self.commits = 0
        """Commits made so far (how many calls of ``commit``)."""

    async def commit(self, group: T) -> None:
        """Return once ``group`` is committed (raises what its commit raised)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((group, done))
        if self._committing is None or self._committing.done():
            self._committing = asyncio.create_task(self._commit_while_waiting())
        await done  # cancelled, the caller stops waiting; its group stays in the commit

    async def _commit_while_waiting(self) -> None:
        while self._waiting:
            taken, self._waiting = self._waiting, []
            self.commits += 1
            try:
                await self._commit([group for group, _ in taken])
            except Exception as exc:  # every caller of this commit raises it
                for _, done in taken:
                    if not done.done():
                        done.set_exception(exc)
                        done.exception()  # retrieved: a caller may have stopped waiting
            except BaseException:  # cancelled (the loop closing): nobody is left to commit
                for _, done in [*taken, *self._waiting]:
                    done.cancel()
                self._waiting = []
                raise
            else:
                for _, done in taken:
                    if not done.done():
                        done.set_result(None)
