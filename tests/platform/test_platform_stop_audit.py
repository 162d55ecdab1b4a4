"""The platform stop (``PLATFORM_STOP``, AR-23) in every organisation's audit log (issue 31, item
1: "platform and organisation stops"). The stop is an environment variable, so what is recorded
is what a starting process finds: the stop in force after it was not, and lifted after it was in
force, once per organisation, as the system; restarts with the same setting add nothing. Owners
read it on their audit page (PL-1)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable

import httpx
from sqlalchemy import select

from app.clock import ManualClock
from app.platform.audit import platform_stop
from app.platform.audit.models import AuditEntry
from app.runtime import Runtime
from app.settings import Settings
from tests.factories import Tenant, create_tenant
from tests.platform.conftest import sign_in

NewClient = Callable[[], Awaitable[httpx.AsyncClient]]


async def stop_entries(runtime: Runtime) -> list[AuditEntry]:
    async with runtime.db.read() as session:
        return list(
            await session.scalars(
                select(AuditEntry)
                .where(AuditEntry.object_type == platform_stop.OBJECT_TYPE)
                .order_by(AuditEntry.id)
            )
        )


def _seen(entries: list[AuditEntry]) -> list[tuple[str, int]]:
    return [(e.action, e.organisation_id) for e in entries]


async def test_the_stop_in_force_then_lifted_is_recorded_once_per_organisation(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant, clock: ManualClock
) -> None:
    orgs = sorted([tenant.organisation_id, other_tenant.organisation_id])
    assert await platform_stop.record_at_start(runtime.db, stopped=False, now=clock.now()) == 0
    assert await stop_entries(runtime) == []  # never in force: nothing to say

    assert await platform_stop.record_at_start(runtime.db, stopped=True, now=clock.now()) == 2
    first = await stop_entries(runtime)
    assert _seen(first) == [("stop.set", org) for org in orgs]
    for entry in first:
        assert (entry.actor_kind, entry.user_id, entry.api_key_id) == ("system", None, None)
        assert (entry.workspace_id, entry.object_id) == (None, "PLATFORM_STOP")
        assert entry.after == {"reason": "PLATFORM_STOP is set for this installation"}
        assert entry.at == clock.now()

    # A restart (or a second process) with the stop still in force adds nothing; an organisation
    # created meanwhile gets its entry from the next start.
    clock.advance(minutes=5)
    assert await platform_stop.record_at_start(runtime.db, stopped=True, now=clock.now()) == 0
    late = await create_tenant(runtime, name="Initech")
    assert await platform_stop.record_at_start(runtime.db, stopped=True, now=clock.now()) == 1
    assert _seen(await stop_entries(runtime))[-1] == ("stop.set", late.organisation_id)

    clock.advance(hours=1)
    assert await platform_stop.record_at_start(runtime.db, stopped=False, now=clock.now()) == 3
    lifted = (await stop_entries(runtime))[-3:]
    assert _seen(lifted) == [("stop.cleared", org) for org in [*orgs, late.organisation_id]]
    assert {(e.actor_kind, e.after) for e in lifted} == {("system", None)}
    assert await platform_stop.record_at_start(runtime.db, stopped=False, now=clock.now()) == 0
    assert len(await stop_entries(runtime)) == 6


async def test_the_runtime_records_what_its_settings_say_and_owners_read_it(
    runtime: Runtime, settings: Settings, tenant: Tenant, new_client: NewClient
) -> None:
    stopped = dataclasses.replace(
        settings, sweepers=dataclasses.replace(settings.sweepers, stop_all=True)
    )
    runtime.settings = stopped
    try:
        assert runtime.platform_stopped()
        await runtime.record_platform_stop()
    finally:
        runtime.settings = settings
    entry = (await stop_entries(runtime))[0]
    owner = await new_client()
    assert (await sign_in(owner, tenant.email, tenant.password)).status_code in (302, 303)
    page = await owner.get("/ui/organisation/audit", params={"action": "stop.*"})
    assert page.status_code == 200
    assert f'data-audit-id="{entry.id}"' in page.text
    await runtime.record_platform_stop()  # the settings of the test: not stopped
    assert _seen(await stop_entries(runtime)) == [
        ("stop.set", tenant.organisation_id),
        ("stop.cleared", tenant.organisation_id),
    ]


async def test_a_worker_process_started_with_the_stop_records_it(
    runtime: Runtime, settings: Settings, tenant: Tenant
) -> None:
    """``python -m app worker`` with ``PLATFORM_STOP=true``: the entry is there once it started."""
    env = {
        **os.environ,
        "DATABASE_URL": settings.database.url,
        "ENCRYPTION_KEY": settings.security.encryption_key,
        "SESSION_SECRET": settings.web.session_secret,
        "PLATFORM_STOP": "true",
        "LOG_LEVEL": "INFO",
    }
    env.pop("REDIS_URL", None)
    worker = subprocess.Popen(
        [sys.executable, "-m", "app", "worker"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        for _ in range(1200):  # waits for the process to start, however slow the machine is
            if await stop_entries(runtime) or worker.poll() is not None:
                break
            await asyncio.sleep(0.1)
    finally:
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=120)
    assert _seen(await stop_entries(runtime)) == [("stop.set", tenant.organisation_id)], output
    assert worker.returncode == 0, output
