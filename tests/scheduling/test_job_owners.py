"""Every queue job says whose it is (PL-1, PL-5): a workspace's, read from its payload, or the
platform's (only the instance's operators see those). A new job kind has to decide: one that
names neither fails here."""

from __future__ import annotations

from app.engines.funnels.contacts.csv_import import CONTACTS_IMPORT
from app.runtime import Runtime
from app.scheduling.bulk import BulkPayload
from app.scheduling.bulk_models import BulkJob
from app.scheduling.dead_rows import record_dead_job
from app.scheduling.job_owners import owner_of, settle_owners
from app.scheduling.models import Job
from tests.factories import create_tenant

PLATFORM_JOBS = {
    "funnels.advance",
    "funnels.deliver",
    "funnels.goals",
    "funnels.match",
    "funnels.ingest",
    "funnels.time_triggers",
}
"""The shared machinery's jobs: shards and sweeps over every workspace at once."""


def test_every_registered_job_names_its_workspace_or_is_a_platform_job(runtime: Runtime) -> None:
    """PL-1: a job whose payload points at a workspace's row declares how to find it."""
    undecided = sorted(
        name
        for name, spec in runtime.registry.specs.items()
        if spec.owner is None and name not in PLATFORM_JOBS
    )
    assert undecided == []
    assert all(
        spec.owner is None for n, spec in runtime.registry.specs.items() if n in PLATFORM_JOBS
    )


async def test_a_dead_jobs_owner_is_read_through_the_row_its_payload_names(
    runtime: Runtime,
) -> None:
    """PL-1: a dead bulk job (its payload names a bulk job row) belongs to that row's workspace;
    a dead shard job is the platform's."""
    tenant = await create_tenant(runtime, name="Acme")
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        row = BulkJob(
            workspace_id=tenant.workspace_id,
            kind=CONTACTS_IMPORT.name,
            status="failed",
            params={},
            source="",
            cursor={},
            processed=0,
            counters={},
            error_count=0,
            chunks=0,
            created_at=now,
            updated_at=now,
        )
        uow.session.add(row)
        await uow.session.flush()
        bulk_id = row.id
    spec = runtime.registry.get(f"bulk.{CONTACTS_IMPORT.name}")
    await record_dead_job(
        runtime.db,
        runtime.clock,
        job_id="bulk-dead",
        name=spec.name,
        payload=spec.encode(BulkPayload(bulk_job_id=bulk_id)),
        attempts=10,
        error="boom",
    )
    shard = runtime.registry.get("funnels.match")
    await record_dead_job(
        runtime.db,
        runtime.clock,
        job_id="shard-dead",
        name=shard.name,
        payload=b"{}",
        attempts=5,
        error="boom",
    )
    assert await settle_owners(runtime.db, runtime.registry) == 2
    assert await settle_owners(runtime.db, runtime.registry) == 0  # settled once
    async with runtime.db.read() as session:
        bulk_job = await session.get(Job, "bulk-dead")
        shard_job = await session.get(Job, "shard-dead")
        assert bulk_job is not None
        assert shard_job is not None
        assert (bulk_job.workspace_id, bulk_job.owner_known) == (tenant.workspace_id, True)
        assert (shard_job.workspace_id, shard_job.owner_known) == (None, True)
        assert await owner_of(session, runtime.registry, bulk_job) == tenant.workspace_id
