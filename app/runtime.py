"""The process's shared machinery: database, queue, clock, secrets, jobs, sweeps and workers.

``serve`` and ``worker`` both build one :class:`Runtime`; ``serve`` also hosts the web app and the
sweepers. Tests build it with a :class:`~app.clock.ManualClock` and start only what they need.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from datetime import datetime
from typing import Any
from uuid import uuid4

from app.clock import Clock, SystemClock
from app.db.checkpoint import WalCheckpointer
from app.db.migrate import SchemaOutOfDate, check_current
from app.db.session import Database
from app.db.write_gate import background_context
from app.heap import settle_startup_heap
from app.platform.audit import platform_stop
from app.platform.crypto import SecretBox, load_or_create_keys
from app.scheduling.arq_queue import ArqQueue
from app.scheduling.arq_workers import ArqWorkers
from app.scheduling.jobs import JobContext, JobRegistry, JobSpec
from app.scheduling.queue import DatabaseQueue, JobQueue
from app.scheduling.resources import Resources
from app.scheduling.sweeper import Sweep, SweepRunner
from app.scheduling.worker import DatabaseWorker, worker_identity
from app.settings import Settings

log = logging.getLogger(__name__)


class Runtime:
    """Shared machinery of one process (a plain class: web frameworks must not introspect it)."""

    def __init__(
        self,
        *,
        settings: Settings,
        clock: Clock,
        db: Database,
        queue: JobQueue,
        secrets: SecretBox,
        session_secret: str,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.db = db
        self.queue = queue
        self.secrets = secrets
        self.session_secret = session_secret
        self.registry = JobRegistry()
        self.sweeps: list[Sweep] = []
        self.resources = Resources()
        self._workers: list[DatabaseWorker | ArqWorkers] = []
        self._sweeper: SweepRunner | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._worker_tasks: dict[DatabaseWorker | ArqWorkers, asyncio.Task[Any]] = {}
        self._upkeep: asyncio.Task[None] | None = None

    def context(self, job_id: str = "", attempt: int = 1) -> JobContext:
        return JobContext(
            db=self.db,
            queue=self.queue,
            clock=self.clock,
            settings=self.settings,
            resources=self.resources,
            secrets=self.secrets,
            job_id=job_id,
            attempt=attempt,
        )

    def add_jobs(self, specs: list[JobSpec[Any]]) -> None:
        self.registry.extend(specs)

    def add_sweeps(self, sweeps: list[Sweep]) -> None:
        self.sweeps.extend(sweeps)

    def platform_stopped(self) -> bool:
        return self.settings.sweepers.stop_all

    async def record_platform_stop(self) -> None:
        """At the start of a process: the platform stop coming into force or being lifted since
        the last start goes in every organisation's audit log (:mod:`app.platform.audit.platform_stop`)."""
        try:
            await platform_stop.record_at_start(
                self.db, stopped=self.platform_stopped(), now=self.clock.now()
            )
        except Exception:
            # A database not yet migrated (or not answering) must not keep the process from
            # starting: /ready reports the database, and the next start records the change.
            log.exception("the platform stop could not be recorded in the audit log")

    # -- lifecycle ----------------------------------------------------------------------------

    def start_database_upkeep(self) -> None:
        """SQLite: checkpoint the write-ahead log in the background (app/db/checkpoint.py), so
        that no commit waits for the disk. PostgreSQL needs nothing here."""
        if not self.settings.database.is_sqlite or self._upkeep is not None:
            return
        checkpointer = WalCheckpointer(self.db.read_engine)
        self._upkeep = asyncio.create_task(checkpointer.run(), name="wal-checkpoints")

    def start_workers(self, queues: list[str] | None = None) -> None:
        qs = self.settings.queue
        if isinstance(self.queue, ArqQueue):
            self._start(
                ArqWorkers(
                    self.queue,
                    self.registry,
                    self.context,
                    concurrency=qs.concurrency,
                    shutdown_grace=qs.shutdown_grace_seconds,
                    queues=queues,
                    lease_seconds=qs.lease_seconds,
                )
            )
            return
        assert isinstance(self.queue, DatabaseQueue)
        # Several leasing loops keep the database busy while jobs run: one loop waits for its
        # lease round trip while another starts and completes its batch.
        loops = max(1, min(qs.lease_loops, qs.concurrency))
        for index in range(loops):
            self._start(
                DatabaseWorker(
                    self.queue,
                    self.registry,
                    self.context,
                    concurrency=qs.concurrency // loops + (index < qs.concurrency % loops),
                    prefetch=qs.prefetch // loops + (index < qs.prefetch % loops),
                    batch_size=qs.batch_size,
                    lease_seconds=qs.lease_seconds,
                    poll_interval=qs.poll_interval,
                    shutdown_grace=qs.shutdown_grace_seconds,
                    queues=queues,
                )
            )

    def _start(self, worker: DatabaseWorker | ArqWorkers) -> None:
        self._workers.append(worker)
        task = asyncio.create_task(worker.run(), name="worker", context=background_context())
        self._worker_tasks[worker] = task
        self._tasks.append(task)

    def start_sweepers(self) -> None:
        self._sweeper = SweepRunner(
            self.db,
            self.clock,
            self.sweeps,
            self.context,
            # Unique per start: a restarted process (same host and pid in a container) must not
            # mistake its dead predecessor's claims for its own.
            owner=f"{worker_identity()}:{uuid4().hex[:8]}",
            lease_seconds=self.settings.sweepers.tick_lease_seconds,
            stopped=self.platform_stopped,
        )
        self._tasks.append(
            asyncio.create_task(self._sweeper.run(), name="sweepers", context=background_context())
        )

    @property
    def sweeping_since(self) -> datetime | None:
        """When this process started its sweepers (``None`` when it runs none)."""
        return self._sweeper.started_at if self._sweeper is not None else None

    async def stale_sweeps(self) -> list[str]:
        """Sweeps of this process without a successful tick within three intervals."""
        if self._sweeper is None:
            return []
        return await self._sweeper.stale()

    def stalled_workers(self) -> list[str]:
        """Database-queue worker loops of this process that ended or stopped coming round."""
        stalled = []
        for worker, task in self._worker_tasks.items():
            if not isinstance(worker, DatabaseWorker):
                continue
            ended = task is not None and task.done()
            if ended or worker.stalled(self.clock.monotonic()):
                stalled.append(f"worker:{worker.worker_id}")
        return stalled

    async def stop(self) -> None:
        """Graceful stop: sweepers first, then workers (no more leasing; finish or release).

        Bounded by the shutdown grace period: in-flight jobs that do not finish within it are
        cancelled and handed back to the queue.
        """
        grace = self.settings.queue.shutdown_grace_seconds
        stopping: list[Any] = []
        if self._sweeper is not None:
            stopping.append(self._sweeper.shutdown(grace))
        for worker in self._workers:
            if isinstance(worker, ArqWorkers):
                stopping.append(worker.shutdown())
            else:
                worker.stop()
        await asyncio.gather(*stopping, return_exceptions=True)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._upkeep is not None:
            # After the workers: their last writes are checkpointed like any others.
            self._upkeep.cancel()
            await asyncio.gather(self._upkeep, return_exceptions=True)
            self._upkeep = None
        self._tasks.clear()
        self._workers.clear()
        self._worker_tasks.clear()
        self._sweeper = None

    async def aclose(self) -> None:
        await self.stop()
        await self.resources.aclose()
        await self.queue.aclose()
        await self.db.dispose()


def build_runtime(
    settings: Settings, clock: Clock | None = None, *, db: Database | None = None
) -> Runtime:
    """Create the runtime's parts; nothing connects until first use. Pass ``db`` to share one
    database (and its connection pool) between runtimes."""
    clock = clock or SystemClock()
    db = db or Database(settings.database)
    keys = load_or_create_keys(
        settings.security.encryption_key,
        settings.web.session_secret,
        settings.security.key_file,
        allow_generate=settings.database.is_sqlite,
    )
    queue: JobQueue
    if settings.queue.uses_redis:
        queue = ArqQueue(
            db,
            clock,
            settings.queue.redis_url,
            settings.queue.arq_queue_name,
            timeout=settings.queue.redis_timeout_seconds,
        )
    else:
        queue = DatabaseQueue(db, clock)
    return Runtime(
        settings=settings,
        clock=clock,
        db=db,
        queue=queue,
        secrets=SecretBox(keys.encryption_key),
        session_secret=keys.session_secret,
    )


async def run_worker_process(runtime: Runtime, *, queues: list[str] | None = None) -> int:
    """Host queue workers until SIGTERM or SIGINT, then shut down gracefully (``python -m app
    worker``). Refuses to start on an out-of-date schema. Returns the process exit status."""
    try:
        await check_current(runtime.db.write_engine)
    except SchemaOutOfDate as exc:
        log.error("%s", exc)
        await runtime.aclose()
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    try:
        await runtime.record_platform_stop()
        runtime.start_database_upkeep()
        runtime.start_workers(queues)
        # Wired and started, before the workers' loops first run: what is alive now lives as
        # long as the process, and full collections need not walk it under load.
        settle_startup_heap(runtime.settings.process.heap_freeze)
        log.info("worker started (%s queue)", runtime.queue.backend)
        await stop.wait()
        log.info(
            "stopping: no more leasing; in-flight jobs get %.0f s, then are released",
            runtime.settings.queue.shutdown_grace_seconds,
        )
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        await runtime.aclose()
    log.info("worker stopped")
    return 0
