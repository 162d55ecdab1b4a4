"""On SQLite: a 20,000-row contact import while the API is used. Nothing answers 500 (nor 503:
the import leaves the write lock to others between chunks), the import completes with its
per-row report, its progress is visible while it runs, and the sweeps keep ticking."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import httpx
import pytest
from sqlalchemy import func, select

from app.engines.funnels.models import Contact
from app.runtime import Runtime
from app.scheduling.models import SweeperState
from app.settings import Settings
from tests.conftest import auth, is_postgres
from tests.factories import create_tenant
from tests.harness.app_client import asgi_transport

pytestmark = pytest.mark.skipif(is_postgres(), reason="the SQLite write lock")

ROWS = 20_000
BAD_EVERY = 1000  # these rows have no e-mail address: 20 refused rows


def _csv() -> str:
    lines = ["email,first_name,last_name,timezone,tags,lists"]
    for i in range(1, ROWS + 1):
        email = "" if i % BAD_EVERY == 0 else f"person{i}@import.test"
        lines.append(f"{email},First{i},Last{i},Europe/Berlin,t{i % 7};all,l{i % 3}")
    return "\n".join(lines) + "\n"


async def test_a_20000_row_import_while_the_api_is_used(
    settings: Settings, real_time_runtime: Runtime
) -> None:
    from app.web.app import create_app

    rt = real_time_runtime
    tenant = await create_tenant(rt, name="Loaded")
    other = await create_tenant(rt, name="Neighbour")
    app = create_app(settings, rt, background=False)
    rt.start_workers()
    rt.start_sweepers()
    statuses: Counter[int] = Counter()
    seen_progress: list[float] = []
    async with httpx.AsyncClient(
        transport=asgi_transport(app), base_url="http://testserver", timeout=60
    ) as client:
        submitted = await client.post(
            "/api/v1/funnels/contacts/import", json={"csv": _csv()}, headers=auth(tenant)
        )
        assert submitted.status_code == 202, submitted.text
        job_url = submitted.json()["url"]
        done = asyncio.Event()

        async def writer(name: str, who: object) -> None:
            n = 0
            while not done.is_set():
                n += 1
                headers = auth(who)  # type: ignore[arg-type]
                created = await client.post(
                    "/api/v1/funnels/contacts",
                    json={"email": f"{name}-{n}@api.test", "tags": ["api"]},
                    headers=headers,
                )
                statuses[created.status_code] += 1
                if created.status_code == 201:
                    changed = await client.patch(
                        f"/api/v1/funnels/contacts/{created.json()['id']}",
                        json={"first_name": f"Renamed {n}"},
                        headers=headers,
                    )
                    statuses[changed.status_code] += 1
                listed = await client.get("/api/v1/funnels/contacts?limit=5", headers=headers)
                statuses[listed.status_code] += 1
                # Pacing the API load like a person using it, not an ordering.
                await asyncio.sleep(0.05)

        async def watcher() -> dict[str, object]:
            # Inside the suite's 300 s per-test limit, so a slow import fails with its own message.
            deadline = time.monotonic() + 280
            while time.monotonic() < deadline:
                status = await client.get(job_url, headers=auth(tenant))
                statuses[status.status_code] += 1
                body = status.json()
                seen_progress.append(body["progress"])
                if body["status"] in ("done", "failed", "cancelled"):
                    done.set()
                    return dict(body)
                await asyncio.sleep(0.25)  # a client polling the job's status
            done.set()
            raise AssertionError(f"the import did not finish in 280 s: {seen_progress[-1:]}")

        writers = [
            asyncio.create_task(writer("same", tenant)),
            asyncio.create_task(writer("same-b", tenant)),
            asyncio.create_task(writer("neighbour", other)),
        ]
        final = await watcher()
        await asyncio.gather(*writers)

        assert final["status"] == "done", final
        assert final["processed"] == ROWS
        assert final["counters"] == {
            "created": ROWS - ROWS // BAD_EVERY,
            "updated": 0,
            "failed": ROWS // BAD_EVERY,
        }
        report = await client.get(f"{job_url}/errors?limit=100", headers=auth(tenant))
        items = [e["item"] for e in report.json()["items"]]
        # Row numbers count the header as row 1.
        assert items == [i + 1 for i in range(BAD_EVERY, ROWS + 1, BAD_EVERY)]

    server_errors = {s: n for s, n in statuses.items() if s >= 500}
    assert not server_errors, statuses
    assert statuses[201] > 0
    # Progress was visible while it ran, not only at the start and the end.
    assert any(0 < p < 1 for p in seen_progress), seen_progress
    assert seen_progress == sorted(seen_progress)
    async with rt.db.read() as session:
        imported = await session.scalar(
            select(func.count()).select_from(Contact).where(Contact.email.like("%@import.test"))
        )
        sweeps = list(await session.scalars(select(SweeperState)))
    assert imported == ROWS - ROWS // BAD_EVERY
    assert sweeps, "the sweeps ran"
    assert all(s.failures == 0 for s in sweeps), [(s.name, s.last_error) for s in sweeps]
