"""Who may read and act on queue jobs (one rule for the API and the dashboard): the admins of
the workspace a job works for, and the instance's operators (PL-5) for every job, platform jobs
included. A workspace member is refused (403); another workspace's job is not found (404, by
:mod:`app.scheduling.job_owners`)."""

from __future__ import annotations

from litestar.exceptions import PermissionDeniedException

from app.db.session import Database, ReadSession
from app.platform.operators import is_instance_operator
from app.platform.service import Principal
from app.scheduling.job_owners import Viewer, settle_owners
from app.scheduling.jobs import JobRegistry


async def job_viewer(
    session: ReadSession, principal: Principal, db: Database, registry: JobRegistry
) -> Viewer:
    """The caller as a reader of jobs, after every dead job's owner is settled (so a job that
    died a moment ago is already its workspace's). Settled first, in transactions of its own:
    ``session`` may be a request's unit of work, which must not hold SQLite's write lock while
    they wait for it."""
    await settle_owners(db, registry)
    operator = await is_instance_operator(session, principal)
    if not operator and not principal.is_admin:
        raise PermissionDeniedException("Only workspace admins may see the workspace's queue jobs")
    return Viewer(workspace_id=principal.workspace_id, operator=operator)


def actor_of(principal: Principal) -> str:
    """Who acted, as a job's history says it."""
    if principal.api_key_id is not None:
        return f"api_key:{principal.api_key_id}"
    return f"user:{principal.user_id}"
