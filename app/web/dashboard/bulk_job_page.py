"""One bulk job's page: its progress bar (``_bulk_progress.html``, :mod:`.bulk_progress`) shown
the way its kind reads — a contact import's created and updated rows, a keyword import's added and
skipped entries, an enrolment's runs started, an audience snapshot's recipients — polled at the
page's own ``…/progress`` while the job runs, with a link back to where the job came from.

The page of any job (``/ui/jobs/{id}``, :mod:`.bulk_jobs_ui`) and the contact import's own page
(``/ui/funnels/contacts/import/{id}``, :mod:`.funnels_import`) are this one page at two
addresses; ``jobs/job.html`` draws it."""

from __future__ import annotations

import dataclasses
from typing import Any

from app.db.session import ReadSession
from app.engines.funnels.campaigns.due.audience import AUDIENCE
from app.engines.funnels.contacts.csv_import import CONTACTS_IMPORT
from app.engines.funnels.runs.due.enrolment import ENROLMENT
from app.engines.ranktracking.keyword_import import KEYWORDS_IMPORT
from app.scheduling.bulk import get_bulk_job
from app.scheduling.bulk_models import BulkJob
from app.web.dashboard.bulk_progress import ProgressView, read_progress

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
"""How each kind reads; the poll URL is the page's, filled in by :func:`read_job_page`."""

ANY_JOB = ProgressView(title="Job", poll_url="", items="items")
"""A kind without a view of its own."""


async def read_job_page(
    session: ReadSession,
    workspace_id: int,
    job_id: int,
    *,
    url: str,
    kinds: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """What ``jobs/job.html`` and its fragment need for the page at ``url`` (the fragment is
    ``{url}/progress``). With ``kinds`` a job of another kind is not found (404), as is a job
    of another workspace."""
    kind = (await get_bulk_job(session, workspace_id, job_id)).kind
    view = dataclasses.replace(VIEWS.get(kind, ANY_JOB), poll_url=f"{url}/progress")
    context = await read_progress(session, workspace_id, job_id, kinds=kinds or (kind,), view=view)
    context["back"] = _back(context["job"])
    return context


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
