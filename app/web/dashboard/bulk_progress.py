"""The dashboard's progress bar of a bulk job (``_bulk_progress.html``): status, share done, the
job's counters and its first refused items, polled by htmx while the job runs. Every page that
starts a bulk job — the contact and keyword imports, an audience snapshot, a large delete —
shows it the same way, from the same job status the API serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.db.session import ReadSession
from app.scheduling.bulk import BulkJobNotFound, errors_of, get_bulk_job, progress
from app.scheduling.bulk_models import BULK_FINAL

REPORT_ROWS = 200


@dataclass(frozen=True, slots=True)
class ProgressView:
    """How one kind of job is shown."""

    title: str
    """What the job is ("Import"): the progress bar's label."""
    poll_url: str
    """The fragment's own URL, polled while the job runs (empty: a page around it polls)."""
    items: str = "rows"
    """What the job counts, plural ("rows", "keywords", "recipients")."""
    item: str = "Row"
    """How a refused item is named in the report's header."""
    counters: tuple[tuple[str, str], ...] = ()
    """``(counter key, label)`` shown as columns."""
    refusals: bool = True
    """Whether the job can refuse items (a "Refused" column and report)."""
    prefix: str = ""
    """Prepended to the fragment's element ids (several on one page)."""


async def read_progress(
    session: ReadSession,
    workspace_id: int,
    job_id: int,
    *,
    kinds: tuple[str, ...],
    view: ProgressView,
) -> dict[str, Any]:
    """What ``_bulk_progress.html`` needs. A job of another workspace or another kind is not
    found (404)."""
    job = await get_bulk_job(session, workspace_id, job_id)
    if job.kind not in kinds:
        raise BulkJobNotFound(f"job {job_id} not found")
    errors = await errors_of(session, job.id, after=None, limit=REPORT_ROWS)
    return {
        "job": job,
        "errors": errors,
        "share": progress(job),
        "running": job.status not in BULK_FINAL,
        "view": view,
    }
