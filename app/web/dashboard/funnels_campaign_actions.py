"""What a person does to a campaign from its page: save the composer (while it can be edited),
send a test to a few addresses, send it now or at a time once the review is confirmed, cancel
it. A refused action shows the page again with its message."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from litestar import Request, post
from litestar.params import FromPath
from litestar.response import Redirect, Template

from app.engines.funnels.campaigns.service import (
    cancel_campaign,
    get_campaign,
    schedule_campaign,
    update_campaign,
)
from app.engines.funnels.campaigns.work import trial
from app.engines.funnels.consent import gate
from app.engines.funnels.contacts.store import find_by_email
from app.engines.funnels.deps import FunnelsDeps
from app.errors import DomainError
from app.integrations.mail import MailError
from app.web.auth import CurrentPrincipal, CurrentRuntime, require_admin
from app.web.dashboard.common import error_message
from app.web.dashboard.funnels_campaign_form import (
    CAMPAIGN_LABELS,
    CAMPAIGNS,
    Form,
    campaign_data_of,
)
from app.web.dashboard.funnels_campaign_page import composer_with
from app.web.deps import CurrentClock, CurrentSettings, Reads, Secrets, Writes


@post(f"{CAMPAIGNS}/{{campaign_id:int}}/edit")
async def edit_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    settings: CurrentSettings,
    secrets: Secrets,
    campaign_id: FromPath[int],
    data: Form,
) -> Template | Redirect:
    """Save the audience and the message; refused once the campaign has started (FN-76)."""
    require_admin(principal)
    try:
        campaign_data = campaign_data_of(data)
        async with uow.attempt():
            await update_campaign(
                uow.session, principal.workspace_id, campaign_id, campaign_data, clock.now()
            )
    except DomainError as exc:
        if exc.status == 404:
            raise
        return await composer_with(
            request,
            principal,
            uow.session,
            clock,
            settings,
            secrets,
            campaign_id,
            error=error_message(exc, CAMPAIGN_LABELS),
            edit_error=True,
        )
    return Redirect(f"{CAMPAIGNS}/{campaign_id}?notice=Saved#message")


@post(f"{CAMPAIGNS}/{{campaign_id:int}}/test-send")
async def test_send_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    clock: CurrentClock,
    settings: CurrentSettings,
    secrets: Secrets,
    campaign_id: FromPath[int],
    data: Form,
) -> Template | Redirect:
    """Send the campaign to a few addresses as a test, through the mail server, counted
    nowhere (the API's ``POST /api/v1/funnels/campaigns/{id}/test-send``)."""
    require_admin(principal)
    to = [a for a in data.get("to", "").replace(";", ",").split(",") if a.strip()]
    preview_email = data.get("preview", "").strip() or None
    try:
        # Its own read, closed before the mail server is called: no connection waits on it.
        async with runtime.db.read() as reading:
            campaign = await get_campaign(reading, principal.workspace_id, campaign_id)
            contact = (
                await find_by_email(reading, principal.workspace_id, preview_email)
                if preview_email
                else None
            )
            emails = await trial.test_messages(
                reading,
                campaign,
                to=to,
                contact_id=contact.id if contact is not None else None,
                base_url=settings.web.public_url,
                domain=settings.mail.from_address.rpartition("@")[2] or "localhost",
                address_key=gate.address_key(runtime.secrets),
                now=runtime.clock.now(),
            )
        transport = runtime.resources.require(FunnelsDeps).trial_mail
        for email in emails:
            await transport.send(email)
        async with runtime.db.write() as uow:
            await trial.record_test(uow.session, campaign, len(emails), runtime.clock.now())
    except DomainError as exc:
        if exc.status == 404:
            raise
        return await composer_with(
            request,
            principal,
            session,
            clock,
            settings,
            secrets,
            campaign_id,
            test_error=f"Test not sent: {error_message(exc, CAMPAIGN_LABELS)}",
            test_to=data.get("to", ""),
            preview_email=preview_email,
        )
    except MailError as exc:
        return await composer_with(
            request,
            principal,
            session,
            clock,
            settings,
            secrets,
            campaign_id,
            test_error=f"Test not sent: the mail server answered {exc}",
            test_to=data.get("to", ""),
            preview_email=preview_email,
        )
    said = f"Test sent to {', '.join(e.to[0] for e in emails)}: {emails[0].subject}"
    query = f"notice={quote(said)}" + (f"&preview={quote(preview_email)}" if preview_email else "")
    return Redirect(f"{CAMPAIGNS}/{campaign_id}?{query}#test")


@post(f"{CAMPAIGNS}/{{campaign_id:int}}/schedule")
async def schedule_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    settings: CurrentSettings,
    secrets: Secrets,
    campaign_id: FromPath[int],
    data: Form,
) -> Template | Redirect:
    """Send now or at a time, once the person confirmed the review (FN-76)."""
    require_admin(principal)
    now = clock.now()
    raw = data.get("send_at", "").strip()
    problem = None
    if data.get("confirm") != "yes":
        problem = "Confirm: tick the box to confirm who gets this campaign"
    try:
        send_at = datetime.fromisoformat(raw).replace(tzinfo=UTC) if raw else now
    except ValueError:
        problem, send_at = "Send at: a date and time (UTC)", now
    if problem is not None:
        return await composer_with(
            request, principal, uow.session, clock, settings, secrets, campaign_id, error=problem
        )
    try:
        async with uow.attempt():
            await schedule_campaign(uow.session, principal.workspace_id, campaign_id, send_at, now)
    except DomainError as exc:
        if exc.status == 404:
            raise
        return await composer_with(
            request,
            principal,
            uow.session,
            clock,
            settings,
            secrets,
            campaign_id,
            error=error_message(exc, CAMPAIGN_LABELS),
        )
    return Redirect(f"{CAMPAIGNS}/{campaign_id}")


@post(f"{CAMPAIGNS}/{{campaign_id:int}}/cancel")
async def cancel_page(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, campaign_id: FromPath[int]
) -> Redirect:
    require_admin(principal)
    await cancel_campaign(uow.session, principal.workspace_id, campaign_id, clock.now())
    return Redirect(f"{CAMPAIGNS}/{campaign_id}")


ROUTES: list[Any] = [edit_page, test_send_page, schedule_page, cancel_page]
