"""The dashboard page of any bulk job, ``/ui/jobs/{id}``: the shared progress bar
(``_bulk_progress.html``) shown the way its kind reads — a keyword import's added and skipped
entries, an enrolment's runs started, an audience snapshot's recipients — polled while the job
runs. Pages that start a bulk job (the keyword import of a list) send the browser here; the API
serves the same status under ``/api/v1/jobs/{id}``."""

from __future__ import annotations

import dataclasses
from typing import Any

from litestar import Request, get
from litestar.params import FromPath
from litestar.response import Template

from app.db.session import ReadSession
from app.engines.funnels.campaigns.audience import AUDIENCE
from app.engines.funnels.contacts.csv_import import CONTACTS_IMPORT
from app.engines.funnels.runs.enrolment import ENROLMENT
from app.engines.ranktracking.keyword_import import KEYWORDS_IMPORT
from app.scheduling.bulk import get_bulk_job
from app.scheduling.bulk_models import BulkJob
from app.web.auth import CurrentPrincipal
from app.web.dashboard.bulk_progress import ProgressView, read_progress
from app.web.dashboard.common import page
from app.web.deps import Reads

JOBS = "/ui/jobs"

VIEWS: dict[str, ProgressView] = {
    CONTACTS_IMPORT.name: ProgressView(
        title="Contact import",
        poll_url="",
        counters=(("created", "Created"), ("updated", "Updated")),
    ),
    KEYWORDS_IMPORT.name: ProgressView(
        title="Keyword import",
        poll_url="",
        items="keywords",
        item="Entry",
        counters=(("added", "Added"), ("skipped", "Already in the list")),
    ),
    ENROLMENT.name: ProgressView(
        title="Enrolment",
        poll_url="",
        items="contacts",
        counters=(("started", "Runs started"),),
        refusals=False,
    ),
    AUDIENCE.name: ProgressView(
        title="Audience snapshot",
        poll_url="",
        items="recipients",
        counters=(("recipients", "Recipients"),),
        refusals=False,
    ),
}


def _view(job_id: int, kind: str) -> ProgressView:
    base = VIEWS.get(kind) or ProgressView(title="Job", poll_url="", items="items")
    return dataclasses.replace(base, poll_url=f"{JOBS}/{job_id}/progress")


def _back(job: BulkJob) -> tuple[str, str] | None:
    """Where the job came from, as (href, label)."""
    params = job.params or {}
    if job.kind == KEYWORDS_IMPORT.name and "list_id" in params:
        return f"/ui/ranktracking/lists/{int(params['list_id'])}", "The keyword list"
    if job.kind == AUDIENCE.name and "campaign_id" in params:
        return f"/ui/funnels/campaigns/{int(params['campaign_id'])}", "The campaign"
    if job.kind == CONTACTS_IMPORT.name:
        return "/ui/funnels/contacts/import", "Import contacts"
    return None


async def _context(session: ReadSession, workspace_id: int, job_id: int) -> dict[str, Any]:
    kind = (await get_bulk_job(session, workspace_id, job_id)).kind
    context = await read_progress(
        session, workspace_id, job_id, kinds=(kind,), view=_view(job_id, kind)
    )
    context["back"] = _back(context["job"])
    return context


@get(f"{JOBS}/{{job_id:int}}")
async def job_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    job_id: FromPath[int],
) -> Template:
    context = await _context(session, principal.workspace_id, job_id)
    return page(request, "jobs/job.html", principal, **context)


@get(f"{JOBS}/{{job_id:int}}/progress")
async def job_progress(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    job_id: FromPath[int],
) -> Template:
    context = await _context(session, principal.workspace_id, job_id)
    return page(request, "_bulk_progress.html", principal, **context)


NAV: list[tuple[str, str]] = []
ROUTES: list[Any] = [job_page, job_progress]
PUBLIC_ROUTES: list[Any] = []
