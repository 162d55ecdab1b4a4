"""One job the database worker started: its bookkeeping, its metrics, and the context its task
runs in (its correlation id, its call permit, a job session)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.db.session_kinds import JOB, set_session_kind
from app.logs import set_correlation
from app.scheduling.metrics import JOB_DURATION, JOBS_FINISHED
from app.scheduling.outside_calls import permit_calls

if TYPE_CHECKING:
    from app.scheduling.outside_calls import CallPermit
    from app.scheduling.queue import LeasedJob


class JobMetrics:
    """The labelled metric children of one job name, looked up once instead of once per job."""

    __slots__ = ("dead", "done", "done_unpublished", "duration", "retry")

    def __init__(self, name: str) -> None:
        self.duration = JOB_DURATION.labels(name)
        self.done = JOBS_FINISHED.labels(name, "done")
        self.retry = JOBS_FINISHED.labels(name, "retry")
        self.dead = JOBS_FINISHED.labels(name, "dead")
        self.done_unpublished = 0
        """Completions counted here and added to ``done`` once per lease or flush."""

    def publish(self) -> None:
        if self.done_unpublished:
            self.done.inc(self.done_unpublished)
            self.done_unpublished = 0


class RunningJob:
    """One job started by this worker: its task's bookkeeping, in one place."""

    __slots__ = ("deadline", "job", "lost", "metrics", "permit", "timed_out")

    def __init__(self, job: LeasedJob, permit: CallPermit, metrics: JobMetrics) -> None:
        self.job = job
        self.permit = permit
        self.metrics = metrics
        self.deadline: float | None = None
        """The shared timer (its due time on the event loop's clock) that times this job out."""
        self.timed_out = False
        self.lost = False
        """Stopped because its lease was lost: the attempt that took the job over records it."""


def enter_job(job_id: str, permit: CallPermit) -> None:
    """Run in a job task's fresh context before it starts (the context ends with the task)."""
    set_correlation(job_id)
    permit_calls(permit)
    set_session_kind(JOB)
