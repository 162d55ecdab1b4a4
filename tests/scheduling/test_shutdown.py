"""Graceful shutdown: a job in flight at stop either completes, or is released and later completes
once. In-process for both backends, then with real worker processes and real signals (SIGTERM,
SIGKILL)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.runtime import Runtime
from app.scheduling.arq_queue import ArqQueue
from app.scheduling.models import JOB_DONE, JOB_QUEUED, JOB_RUNNING
from app.settings import Settings
from tests.conftest import eventually
from tests.scheduling.conftest import BACKENDS, Runtimes, arq_workers, database_worker
from tests.scheduling.helpers import job_row, running, wait_for_status, worked_through
from tests.scheduling.testjobs import RECORD, RUNS, Work

REPO = Path(__file__).resolve().parents[2]


def workers_for(runtime: Runtime, grace: float) -> Any:
    if isinstance(runtime.queue, ArqQueue):
        return arq_workers(runtime, shutdown_grace=grace)
    return database_worker(runtime, shutdown_grace=grace)


async def stop(worker: Any, task: asyncio.Task[None]) -> float:
    """Stop ``worker`` like SIGTERM does and return how long it took."""
    began = time.monotonic()
    if hasattr(worker, "shutdown"):
        await worker.shutdown()
    else:
        worker.stop()
    await asyncio.wait_for(task, 60)
    return time.monotonic() - began


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_job_finishing_within_the_grace_period_completes(
    backend: str, runtimes: Runtimes
) -> None:
    runtime = runtimes.make(backend)
    await runtime.queue.enqueue(
        None, RECORD, Work(key="short", seconds=0.5), job_id=f"short-{backend}-{id(RUNS):x}"
    )
    # A grace far longer than the job, and than any pause a loaded machine takes: a stop within
    # half of it waited for the job, not for the grace.
    worker = workers_for(runtime, grace=120)
    task = asyncio.create_task(worker.run())
    await eventually(lambda: _true(RUNS.started["short"] == 1))
    took = await stop(worker, task)
    assert RUNS.done["short"] == 1
    assert took < 60, "it waited for the job, not for the whole grace period"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_job_outlasting_the_grace_period_is_released_and_later_completes_once(
    backend: str, runtimes: Runtimes
) -> None:
    runtime = runtimes.make(backend)
    job_id = f"long-{backend}-{id(RUNS):x}"
    await runtime.queue.enqueue(
        None, RECORD, Work(key="long", wait_for_release=True), job_id=job_id
    )
    worker = workers_for(runtime, grace=0.3)
    task = asyncio.create_task(worker.run())
    await eventually(lambda: _true(RUNS.started["long"] == 1))
    took = await stop(worker, task)
    # The job waits for its gate, for ever: any stop is the grace's doing; the bound only leaves
    # room for releasing the job on a loaded machine.
    assert took < 30, "shutdown is bounded by the grace period"
    assert RUNS.done["long"] == 0
    if backend == "database":
        row = await job_row(runtime.db, job_id)
        assert row is not None
        assert (row.status, row.attempts, row.leased_by) == (JOB_QUEUED, 0, None), (
            "released without counting the attempt"
        )
    RUNS.gate("long").set()
    async with running(workers_for(runtime, grace=1)):
        await eventually(lambda: _true(RUNS.done["long"] == 1))
        await worked_through(runtime.queue)  # a third start would have happened by now
    assert (RUNS.started["long"], RUNS.done["long"]) == (2, 1)


# -- real processes ----------------------------------------------------------------------------


class WorkerProcess:
    """``python -m tests.scheduling.worker_proc`` on the test database (and Redis queue)."""

    def __init__(self, runtime: Runtime, markers: Path, **env: str) -> None:
        settings: Settings = runtime.settings
        self.markers = markers
        self.env = {
            **os.environ,
            "DATABASE_URL": settings.database.url,
            "ENCRYPTION_KEY": settings.security.encryption_key,
            "SESSION_SECRET": settings.web.session_secret,
            "KEY_FILE": settings.security.key_file,
            "REDIS_URL": settings.queue.redis_url,
            "ARQ_QUEUE_NAME": settings.queue.arq_queue_name,
            "JOB_POLL_INTERVAL": "0.05",
            "SWEEPLINE_TEST_MARKERS": str(markers),
            **env,
        }
        self.log = markers.with_name(f"{markers.name}.{id(self):x}.log")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *command: str) -> WorkerProcess:
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", *(command or ("tests.scheduling.worker_proc",))],
                cwd=REPO,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        return self

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    async def exit_code(self, timeout: float = 20) -> tuple[int, str]:
        assert self.proc is not None
        code = await asyncio.to_thread(self.proc.wait, timeout)
        return code, self.output()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def lines(markers: Path, kind: str) -> list[str]:
    if not markers.exists():
        return []
    return [line for line in markers.read_text().splitlines() if line.startswith(kind + " ")]


@pytest.fixture
def processes() -> Any:
    started: list[WorkerProcess] = []
    yield started
    for proc in started:
        proc.kill()


async def wait_for_marker(markers: Path, kind: str, count: int, timeout: float = 20) -> None:
    async def seen() -> bool:
        return len(lines(markers, kind)) >= count

    await eventually(seen, timeout=timeout)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
async def test_sigterm_lets_the_job_in_flight_complete(
    backend: str, runtimes: Runtimes, tmp_path: Path, processes: list[WorkerProcess]
) -> None:
    runtime = runtimes.make(backend)
    markers = tmp_path / "markers"
    job_id = f"term-{backend}-{id(RUNS):x}"
    await runtime.queue.enqueue(None, RECORD, Work(key="term", seconds=1.5), job_id=job_id)
    worker = WorkerProcess(runtime, markers, SHUTDOWN_GRACE_SECONDS="20")
    processes.append(worker.start())
    await wait_for_marker(markers, "start", 1)
    worker.signal(signal.SIGTERM)
    code, log = await worker.exit_code()
    assert code == 0, log
    assert len(lines(markers, "start")) == 1
    assert len(lines(markers, "done")) == 1
    if backend == "database":
        assert (await wait_for_status(runtime.db, job_id, JOB_DONE)).attempts == 1


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
async def test_sigterm_releases_a_job_outlasting_the_grace_and_another_process_completes_it_once(
    backend: str, runtimes: Runtimes, tmp_path: Path, processes: list[WorkerProcess]
) -> None:
    runtime = runtimes.make(backend)
    markers = tmp_path / "markers"
    job_id = f"release-{backend}-{id(RUNS):x}"
    await runtime.queue.enqueue(None, RECORD, Work(key="rel"), job_id=job_id)
    first = WorkerProcess(
        runtime, markers, SHUTDOWN_GRACE_SECONDS="0.5", SWEEPLINE_TEST_JOB_SECONDS="60"
    )
    processes.append(first.start())
    await wait_for_marker(markers, "start", 1)
    began = time.monotonic()
    first.signal(signal.SIGTERM)
    code, log = await first.exit_code()
    assert code == 0, log
    # The job would take a minute; the grace is half a second.
    assert time.monotonic() - began < 30, "shutdown is bounded by the grace period"
    assert lines(markers, "done") == []
    if backend == "database":
        row = await job_row(runtime.db, job_id)
        assert row is not None
        assert (row.status, row.attempts) == (JOB_QUEUED, 0)
    second = WorkerProcess(runtime, markers, SWEEPLINE_TEST_JOB_SECONDS="0")
    processes.append(second.start())
    await wait_for_marker(markers, "done", 1)
    # A marker job behind it: once the second process has run that, it has seen the queue
    # after the job finished (a repeated start would be in the markers file by then).
    await runtime.queue.enqueue(None, RECORD, Work(key="marker"), job_id=f"marker-{job_id}")
    await wait_for_marker(markers, "done marker", 1)
    second.signal(signal.SIGTERM)
    code, log = await second.exit_code()
    assert code == 0, log
    assert len(lines(markers, "start rel")) == 2
    assert len(lines(markers, "done rel")) == 1


@pytest.mark.slow
async def test_after_sigkill_the_lease_expires_and_another_worker_completes_the_job_once(
    runtimes: Runtimes, tmp_path: Path, processes: list[WorkerProcess]
) -> None:
    runtime = runtimes.make("database")
    markers = tmp_path / "markers"
    await runtime.queue.enqueue(None, RECORD, Work(key="killed"), job_id="killed")
    doomed = WorkerProcess(runtime, markers, JOB_LEASE_SECONDS="2", SWEEPLINE_TEST_JOB_SECONDS="60")
    processes.append(doomed.start())
    await wait_for_marker(markers, "start", 1)
    doomed.signal(signal.SIGKILL)
    code, _ = await doomed.exit_code()
    assert code == -signal.SIGKILL
    row = await job_row(runtime.db, "killed")
    assert row is not None
    assert row.status == JOB_RUNNING, "nobody released it: the process had no chance"
    survivor = WorkerProcess(
        runtime, markers, JOB_LEASE_SECONDS="2", SWEEPLINE_TEST_JOB_SECONDS="0"
    )
    processes.append(survivor.start())
    row = await wait_for_status(runtime.db, "killed", JOB_DONE, timeout=20)
    survivor.signal(signal.SIGTERM)
    code, log = await survivor.exit_code()
    assert code == 0, log
    assert row.attempts == 2
    assert len(lines(markers, "start")) == 2
    assert len(lines(markers, "done")) == 1


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_worker_command_starts_and_stops_on_sigterm(
    backend: str, runtimes: Runtimes, tmp_path: Path, processes: list[WorkerProcess]
) -> None:
    """``python -m app worker`` itself, with every engine registered."""
    runtime = runtimes.make(backend)
    worker = WorkerProcess(runtime, tmp_path / "markers", LOG_LEVEL="INFO")
    processes.append(worker.start("app", "worker"))
    started = f"worker started ({'arq' if backend == 'arq' else 'database'} queue)"
    # Importing every engine and the start-up collection before the freeze: on a loaded machine
    # (load 15 on two cores) the database-queue worker once took more than 20 s to say so.
    await eventually(lambda: _true(started in worker.output()), timeout=60)
    # A process that is to keep running gives no event; half a second of it running is the check.
    await asyncio.sleep(0.5)
    assert worker.proc is not None
    assert worker.proc.poll() is None, "the worker keeps running"
    worker.signal(signal.SIGTERM)
    code, log = await worker.exit_code()
    assert code == 0, log
    assert "worker stopped" in log
    frozen = re.search(r"start-up heap frozen: (\d+) objects", log)
    assert frozen is not None, log
    assert int(frozen[1]) > 0


async def _true(value: bool) -> bool:
    return value
