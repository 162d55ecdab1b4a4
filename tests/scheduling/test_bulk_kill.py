"""PL-12 with a crash: a worker process SIGKILLed while it runs one bulk job of every kind (contact
CSV import, funnel enrolment, campaign audience snapshot, keyword import) leaves each job to the
next worker, which finishes it within a lease of the kill plus the work left, every item applied
once. On the database queue (SQLite or PostgreSQL, whichever the session uses) and on arq (Redis),
with the default ``JOB_LEASE_SECONDS``: on arq a killed job used to stay "in progress" for the
longest job timeout of the worker plus 10 s (over 15 minutes beside the ad rules' job).
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from app.db.session import Database
from app.engines.funnels.campaigns.models import MATERIALISING
from app.scheduling.bulk_models import BULK_DONE
from tests.conftest import eventually, truncate_all
from tests.scheduling import bulk_kill
from tests.scheduling.conftest import BACKENDS, Runtimes
from tests.scheduling.test_shutdown import WorkerProcess

ITEMS = 1500
"""Items per job: 150 chunks each, so the kill finds every job mid-way."""
LEASE_SECONDS = 30
"""``JOB_LEASE_SECONDS``' default, given explicitly: what the recovery bound is made of."""
RECOVERY_BOUND = 60.0
"""A dead worker's job runs again within this long (a lease, the recovery round, a poll)."""


@pytest.fixture(autouse=True)
async def every_table_emptied(shared_db: Database) -> AsyncIterator[None]:
    """Unlike the rest of the queue's tests, these write every engine's tables (contacts, a
    funnel, a campaign, a keyword list): left behind, the campaign would be due in a later test."""
    yield
    await truncate_all(shared_db)


@pytest.fixture
def processes() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for proc in started:
        proc.kill()


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_pl12_bulk_jobs_of_a_sigkilled_worker_finish_once_within_a_lease(
    backend: str, runtimes: Runtimes, tmp_path: Path, processes: list[WorkerProcess]
) -> None:
    runtime = runtimes.make(backend)
    started = await bulk_kill.start_all(runtime, ITEMS, uuid.uuid4().hex[:8])
    env = {
        "BULK_CHUNK_ITEMS": str(bulk_kill.CHUNK_ITEMS),
        "JOB_LEASE_SECONDS": str(LEASE_SECONDS),
        "SWEEPERS_ENABLED": "false",
    }
    doomed = WorkerProcess(runtime, tmp_path / "markers", **env)
    processes.append(doomed.start("app", "worker"))
    began = time.monotonic()
    # Real time passing in another process: the worker importing every engine, then its chunks.
    await eventually(lambda: bulk_kill.all_mid_way(runtime, started), timeout=120, interval=0.01)
    doomed.signal(signal.SIGKILL)
    killed_at = time.monotonic()
    code, _ = await doomed.exit_code()
    assert code == -signal.SIGKILL
    before = await bulk_kill.states(runtime, started)
    assert all(j.status != BULK_DONE for j in before.values()), "every job was mid-way"
    assert await bulk_kill.campaign_status(runtime, started.campaign_id) == MATERIALISING
    # The work the first process did, scaled to the whole: what the bound allows for the rest.
    done_share = min(j.processed / (j.total or ITEMS) for j in before.values())
    work = (killed_at - began) / max(done_share, 0.05)

    survivor = WorkerProcess(runtime, tmp_path / "markers", **env)
    processes.append(survivor.start("app", "worker"))
    await eventually(
        lambda: bulk_kill.all_done(runtime, started),
        timeout=RECOVERY_BOUND + work + 30,  # + the survivor's start-up (imports, connections)
        interval=0.1,
    )
    after = await bulk_kill.states(runtime, started)
    for kind, job in after.items():
        assert job.processed == job.total == ITEMS, kind
        assert job.error_count == 0, (kind, job.last_error)
        # Counters are added per committed chunk: a chunk applied twice would count twice. (An
        # audience's and an enrolment's first chunk is applied when the job is started.)
        assert max(job.counters.values()) in (ITEMS, ITEMS - bulk_kill.CHUNK_ITEMS), (
            kind,
            job.counters,
        )
    rows = await bulk_kill.applied(runtime, started)
    assert rows == {kind: (ITEMS, ITEMS) for kind in started.jobs}, rows
    assert await bulk_kill.campaign_status(runtime, started.campaign_id) != MATERIALISING
    survivor.signal(signal.SIGTERM)
    code, log = await survivor.exit_code(timeout=60)
    assert code == 0, log
