"""Who operates the instance: the owners and admins of its first organisation, the one set up
with the instance (by the setup page or the first ``create-admin``).

The instance's machinery — the sweepers, the job queue, dead jobs with their errors — is shared by
every organisation on it, so it is shown to the instance's operators only; an organisation that
merely has an account on someone else's instance sees its own workspaces' activity, never the
other tenants' jobs.
"""

from __future__ import annotations

from sqlalchemy import func, select

from app.db.session import ReadSession
from app.platform.models import Organisation
from app.platform.service import Principal


async def is_instance_operator(session: ReadSession, principal: Principal) -> bool:
    if not principal.manages_organisation:
        return False
    first = await session.scalar(select(func.min(Organisation.id)))
    return first == principal.organisation_id
