"""The funnel simulator page: pick a contact, see the path they would take through a funnel and
every message they would get, on a simulated clock, with nothing kept."""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.params import FromPath, FromQuery
from litestar.response import Template

from app.engines.funnels.contacts.store import find_by_email
from app.engines.funnels.definitions.service import get_funnel
from app.engines.funnels.definitions.simulate import simulate
from app.errors import DomainError
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard.common import error_message, page
from app.web.deps import Reads


@get("/ui/funnels/{funnel_id:int}/simulate")
async def simulate_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    funnel_id: FromPath[int],
    email: FromQuery[str | None] = None,
    source: FromQuery[str] = "draft",
) -> Template:
    """Pick a contact, see the path they would take and every message they would get.

    The simulation runs in a transaction of its own that it throws away (the runtime's
    database), apart from the page's reads."""
    funnel = await get_funnel(session, principal.workspace_id, funnel_id)
    contact = await find_by_email(session, principal.workspace_id, email) if email else None
    result = None
    error = None
    if email and contact is None:
        error = f"No contact with e-mail {email}"
    elif contact is not None:
        try:
            result = await simulate(
                runtime.db,
                principal.workspace_id,
                funnel_id=funnel_id,
                contact_id=contact.id,
                source="published" if source == "published" else "draft",
                start=runtime.clock.now(),
            )
        except DomainError as exc:
            error = error_message(exc, {})
    tpl = page(
        request,
        "funnels_campaigns/simulate.html",
        principal,
        funnel=funnel,
        email=email or "",
        source=source,
        result=result,
        error=error,
    )
    if error:
        tpl.status_code = 422
    return tpl


ROUTES: list[Any] = [simulate_page]
