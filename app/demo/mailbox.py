"""The demo's mailbox page: what the demo's SMTP sink received. Added to the dashboard only in demo
mode, and shown only to members of the demo workspace (the sink holds no tenant of its own)."""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.exceptions import NotFoundException
from litestar.response import Template

from app.demo import demo_workspace_id
from app.sandbox.smtp import SmtpSink
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard.common import page


@get("/ui/funnels/mailbox")
async def mailbox_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Template:
    if principal.workspace_id != await demo_workspace_id(runtime):
        raise NotFoundException("The mailbox belongs to the demo workspace")
    messages = [m for sink in SmtpSink.running() for m in sink.snapshot()]
    return page(
        request, "funnels/mailbox.html", principal, messages=list(reversed(messages[-200:]))
    )


PAGES: list[Any] = [mailbox_page]
"""Dashboard pages the demo adds (they receive ``principal`` and ``runtime``)."""
