"""A worker process freezes its start-up heap (``gc.freeze``, :mod:`app.heap`) once wired and
started, so full collections under load walk only what its jobs made: a job running in a real
worker process (``run_worker_process``, as ``python -m app worker`` runs it) sees a frozen heap."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.scheduling.conftest import BACKENDS, Runtimes
from tests.scheduling.test_shutdown import WorkerProcess, lines, wait_for_marker
from tests.scheduling.testjobs import HEAP_PROBE, HeapProbe


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_started_worker_process_runs_its_jobs_on_a_frozen_heap(
    backend: str, runtimes: Runtimes, tmp_path: Path
) -> None:
    runtime = runtimes.make(backend)
    markers = tmp_path / "markers"
    await runtime.queue.enqueue(None, HEAP_PROBE, HeapProbe(key="heap"), job_id=f"heap-{backend}")
    worker = WorkerProcess(runtime, markers).start()
    try:
        # A process start: on a loaded machine (load 20 on two cores) it took more than 20 s.
        await wait_for_marker(markers, "frozen heap", 1, timeout=60)
        worker.signal(signal.SIGTERM)
        code, log = await worker.exit_code()
    finally:
        worker.kill()
    assert code == 0, log
    [probe] = lines(markers, "frozen heap")
    frozen = int(probe.split()[2])
    assert frozen > 0, "the worker left its start-up heap to the collector"
