"""Four bulk jobs of every kind the product has, started side by side for a worker process to run:
a contact CSV import, a funnel enrolment, a campaign's audience snapshot and a keyword import,
each in a workspace of its own. Shared by the kill test and the recovery benchmark's checks.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from app.engines.funnels.campaigns.due.audience import start_materialising
from app.engines.funnels.campaigns.models import Campaign, Recipient
from app.engines.funnels.campaigns.service import CampaignData, create_campaign
from app.engines.funnels.contacts.csv_import import start_import
from app.engines.funnels.models import Contact
from app.engines.funnels.models import Run as FunnelRun
from app.engines.funnels.runs.due.enrolment import start_enrolment
from app.engines.ranktracking.keyword_import import start_keyword_import
from app.engines.ranktracking.lists import create_list
from app.engines.ranktracking.models import ListKeyword
from app.runtime import Runtime
from app.scheduling.bulk_models import BULK_DONE, BulkJob
from tests.engines.funnels.factories import bulk_contacts, email_node, graph, published
from tests.factories import create_tenant

CHUNK_ITEMS = 10
"""``BULK_CHUNK_ITEMS`` of the worker processes: the smallest chunk, so each job has many."""


@dataclass(frozen=True)
class Started:
    """One bulk job per kind: kind → bulk job id, and what to count its rows by."""

    jobs: dict[str, int]
    items: int
    contacts_ws: int
    funnel_id: int
    campaign_id: int
    list_id: int


async def start_all(runtime: Runtime, items: int, tag: str) -> Started:
    """Queue the four jobs (nothing runs in this process: a worker process takes them)."""
    now = runtime.clock.now()
    queue = runtime.queue
    ws = [(await create_tenant(runtime, name=f"{tag} {k}")).workspace_id for k in range(4)]
    jobs: dict[str, int] = {}
    async with runtime.db.write() as uow:
        text = "email,first_name\n" + "".join(f"i{n}@{tag}.test,N{n}\n" for n in range(items))
        job = await start_import(
            uow,
            queue,
            workspace_id=ws[0],
            text=text,
            columns=None,
            max_rows=100_000,
            now=now,
        )
        jobs["funnels.contacts_import"] = job.id
    await bulk_contacts(runtime, ws[1], items, prefix=f"e{tag}")
    funnel_id, version = await published(runtime, ws[1], graph(email_node("a")))
    async with runtime.db.write() as uow:
        entered = await start_enrolment(
            uow,
            queue,
            version,
            now=now,
            contact_ids=None,
            predicate=None,
            chunk_items=CHUNK_ITEMS,
        )
        assert entered.job is not None
        jobs["funnels.enrolment"] = entered.job.id
    await bulk_contacts(runtime, ws[2], items, prefix=f"c{tag}")
    async with runtime.db.write() as uow:
        campaign = await create_campaign(
            uow.session, ws[2], CampaignData(name="Big", subject="Hi", body="News"), now
        )
    async with runtime.db.write() as uow:
        campaign = await start_materialising(uow, queue, campaign.id, now, chunk_items=CHUNK_ITEMS)
        assert campaign.audience_job_id is not None
        jobs["funnels.campaign_audience"] = campaign.audience_job_id
    async with runtime.db.write() as uow:
        kl, _ = await create_list(
            uow.session, workspace_id=ws[3], name="Main", keywords=[], now=now
        )
    async with runtime.db.write() as uow:
        text = "".join(f"keyword {n}\n" for n in range(items))
        job = await start_keyword_import(
            uow, queue, workspace_id=ws[3], list_id=kl.id, text=text, fmt="text", now=now
        )
        jobs["ranktracking.keywords_import"] = job.id
    return Started(jobs, items, ws[0], funnel_id, campaign.id, kl.id)


async def states(runtime: Runtime, started: Started) -> dict[str, BulkJob]:
    async with runtime.db.read() as session:
        rows = await session.scalars(select(BulkJob).where(BulkJob.id.in_(started.jobs.values())))
        by_id = {row.id: row for row in rows}
    return {kind: by_id[job_id] for kind, job_id in started.jobs.items()}


async def all_mid_way(runtime: Runtime, started: Started) -> bool:
    """Every job has committed a few chunks and none has finished."""
    jobs = await states(runtime, started)
    return all(j.chunks >= 2 and j.status != BULK_DONE for j in jobs.values())


async def all_done(runtime: Runtime, started: Started) -> bool:
    return all(j.status == BULK_DONE for j in (await states(runtime, started)).values())


async def applied(runtime: Runtime, started: Started) -> dict[str, tuple[int, int]]:
    """Per kind: (rows the job wrote, distinct items among them)."""
    async with runtime.db.read() as s:

        async def two(column: object, *where: object) -> tuple[int, int]:
            row = (
                await s.execute(
                    select(func.count(column), func.count(func.distinct(column))).where(*where)  # type: ignore[arg-type]
                )
            ).one()
            return int(row[0]), int(row[1])

        return {
            "funnels.contacts_import": await two(
                Contact.email, Contact.workspace_id == started.contacts_ws
            ),
            "funnels.enrolment": await two(
                FunnelRun.contact_id, FunnelRun.funnel_id == started.funnel_id
            ),
            "funnels.campaign_audience": await two(
                Recipient.contact_id, Recipient.campaign_id == started.campaign_id
            ),
            "ranktracking.keywords_import": await two(
                ListKeyword.keyword, ListKeyword.list_id == started.list_id
            ),
        }


async def campaign_status(runtime: Runtime, campaign_id: int) -> str:
    async with runtime.db.read() as s:
        return str(await s.scalar(select(Campaign.status).where(Campaign.id == campaign_id)))
