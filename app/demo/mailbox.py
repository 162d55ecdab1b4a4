"""The demo's mailbox page: what the demo's SMTP sink received. Added to the dashboard only in demo
mode, and shown only to members of the demo workspace (the sink holds no tenant of its own). Each
message can be reported as bounced, complained about or opened by a provider's simulator
(:mod:`app.demo.mail_reports`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from litestar import Request, get, post
from litestar.exceptions import NotFoundException
from litestar.response import Redirect, Template

from app.demo import demo_workspace_id
from app.demo.mail_reports import KINDS, PROVIDERS, send_report
from app.errors import ValidationFailed
from app.integrations.http_guard import ClientOptions, outbound_client
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
        request,
        "funnels/mailbox.html",
        principal,
        messages=list(reversed(messages[-200:])),
        providers=PROVIDERS,
        kinds=KINDS,
        reported=request.query_params.get("reported"),
    )


@post("/ui/funnels/mailbox/report")
async def report_message(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, runtime: CurrentRuntime
) -> Redirect:
    """Have a provider's simulator report one received message to the workspace's receiver."""
    if principal.workspace_id != await demo_workspace_id(runtime):
        raise NotFoundException("The mailbox belongs to the demo workspace")
    form = await request.form()
    provider, kind = str(form.get("provider", "")), str(form.get("kind", ""))
    if provider not in PROVIDERS or kind not in KINDS:
        raise ValidationFailed.field("provider", f"one of {', '.join(PROVIDERS)}")
    wanted = str(form.get("message_id", ""))
    found = [m for sink in SmtpSink.running() for m in sink.snapshot() if m.message_id == wanted]
    if not found:
        raise NotFoundException("No such message in the mailbox")
    # Over HTTP to this very app, as the provider would post it.
    async with outbound_client(
        provider="demo-mailbox",
        options=ClientOptions(timeout_seconds=10.0),
        base_url=str(request.base_url),
    ) as client:
        answer = await send_report(client, principal.workspace_id, provider, kind, found[-1])
    said = f"{provider} reported {kind}: HTTP {answer['status']}, stored {answer.get('stored')}"
    return Redirect("/ui/funnels/mailbox?" + urlencode({"reported": said}))


PAGES: list[Any] = [mailbox_page, report_message]
"""Dashboard pages the demo adds (they receive ``principal`` and ``runtime``)."""
