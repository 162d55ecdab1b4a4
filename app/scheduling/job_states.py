"""The states of a queued job (``jobs.status``) and the moves between them.

A job is ``queued`` until a worker claims it (``running``, under a lease); it ends ``done``, goes
back to ``queued`` (a retry, or its lease expired with tries left) or ends ``dead`` (out of
tries, or an error retrying cannot help). A person may retry or requeue a dead job (``queued``)
or discard it (``discarded``). An arq-backed job has a row only once it is dead (or done).
"""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

JobStatus = Literal["queued", "running", "done", "dead", "discarded"]

JOB_QUEUED: Final = "queued"
JOB_RUNNING: Final = "running"
JOB_DONE: Final = "done"
JOB_DEAD: Final = "dead"
JOB_DISCARDED: Final = "discarded"
"""A dead job a person gave up on: kept, with its history, and never run again."""
JOB_STATUSES: tuple[JobStatus, ...] = literal_states(JobStatus)

JOBS = StateMachine(
    table="jobs",
    column="status",
    title="Queued job",
    states=JOB_STATUSES,
    initial=(JOB_QUEUED, JOB_DEAD),
    transitions={
        # Claimed by a worker; an arq job's row marked done; an arq job's dead record.
        JOB_QUEUED: (JOB_RUNNING, JOB_DONE, JOB_DEAD),
        # Finished; retried or its lease lost (tries left); out of tries.
        JOB_RUNNING: (JOB_DONE, JOB_QUEUED, JOB_DEAD),
        # A person retries or requeues it, or discards it.
        JOB_DEAD: (JOB_QUEUED, JOB_DISCARDED),
        # The same arq job id dying again records it dead again.
        JOB_DISCARDED: (JOB_DEAD,),
    },
    notes={JOB_DEAD: "arq jobs get a row only when they die"},
)
