"""A worker process freezes its start-up heap (``gc.freeze``, :mod:`app.heap`) once wired and
started, so full collections under load walk only what its jobs made: a job running in a real
worker process (``run_worker_process``, as ``python -m app worker`` runs it) sees a frozen heap,
and none with ``HEAP_FREEZE=off``."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from app.runtime import Runtime
from tests.scheduling.conftest import BACKENDS, Runtimes
from tests.scheduling.test_shutdown import WorkerProcess, lines, wait_for_marker
from tests.scheduling.testjobs import HEAP_PROBE, HeapProbe


async def _frozen_in_a_worker_process(
    runtime: Runtime, markers: Path, job_id: str, **env: str
) -> int:
    """How many objects a real worker process had frozen when it ran a job."""
    await runtime.queue.enqueue(None, HEAP_PROBE, HeapProbe(key="heap"), job_id=job_id)
    worker = WorkerProcess(runtime, markers, **env).start()
    try:
        # A process start: on a loaded machine (load 20 on two cores) it took more than 20 s.
        await wait_for_marker(markers, "frozen heap", 1, timeout=60)
        worker.signal(signal.SIGTERM)
        code, log = await worker.exit_code()
    finally:
        worker.kill()
    assert code == 0, log
    [probe] = lines(markers, "frozen heap")
    return int(probe.split()[2])


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_started_worker_process_runs_its_jobs_on_a_frozen_heap(
    backend: str, runtimes: Runtimes, tmp_path: Path
) -> None:
    frozen = await _frozen_in_a_worker_process(
        runtimes.make(backend), tmp_path / "markers", f"heap-{backend}"
    )
    assert frozen > 0, "the worker left its start-up heap to the collector"


@pytest.mark.slow
async def test_a_worker_process_with_the_freeze_off_freezes_nothing(
    runtimes: Runtimes, tmp_path: Path
) -> None:
    """One queue backend is enough: the freeze does not depend on where jobs come from."""
    frozen = await _frozen_in_a_worker_process(
        runtimes.make("database"), tmp_path / "markers", "heap-off", HEAP_FREEZE="off"
    )
    assert frozen == 0, "HEAP_FREEZE=off, yet the worker froze its start-up heap"
