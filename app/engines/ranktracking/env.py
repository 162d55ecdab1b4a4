"""What engine code needs from its surroundings. Both the process :class:`~app.runtime.Runtime`
(web requests) and a job's :class:`~app.scheduling.jobs.JobContext` provide it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from app.clock import Clock
    from app.db.session import Database
    from app.platform.crypto import SecretBox
    from app.scheduling.queue import JobQueue
    from app.scheduling.resources import Resources
    from app.settings import Settings


class Env(Protocol):
    @property
    def db(self) -> Database: ...

    @property
    def queue(self) -> JobQueue: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def resources(self) -> Resources: ...

    @property
    def secrets(self) -> SecretBox: ...
