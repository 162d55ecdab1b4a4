"""Delivery reports in the mail providers' native webhook formats (beside the generic
``POST /hooks/funnels/delivery``), each verified the provider's own way:

- ``POST /hooks/funnels/{workspace}/ses``: Amazon SES through an SNS HTTPS subscription. The SNS
  signature is verified against the certificate at ``SigningCertURL`` (allowed URLs only) and the
  ``TopicArn`` must be one of the workspace secret ``funnels.ses.topic_arns`` (comma separated):
  a verified signature only proves that *some* SNS topic sent it. A verified
  ``SubscriptionConfirmation`` from an allowed topic is confirmed by visiting its SubscribeURL.
- ``POST /hooks/funnels/{workspace}/mailgun``: Mailgun webhooks, signed with the workspace
  secret ``funnels.mailgun.signing_key`` (Mailgun's "HTTP webhook signing key").

Each report becomes one stored inbound delivery event (idempotent on the provider's event id) and
is applied off the request path like every other event.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, post
from litestar.params import FromPath

from app.engines.funnels.deps import FunnelsDeps
from app.errors import Unauthorized, ValidationFailed
from app.integrations.mail.reports import Report, from_mailgun, from_ses, verify_mailgun
from app.integrations.mail.sns import SnsError, SnsVerifier, ses_event
from app.platform.service import get_secret
from app.runtime import Runtime
from app.web.auth import CurrentRuntime
from app.web.hooks.funnels_public import store_event
from app.web.input_guard import check_json

SES_TOPICS_SECRET = "funnels.ses.topic_arns"  # noqa: S105 - a secret's name
MAILGUN_KEY_SECRET = "funnels.mailgun.signing_key"  # noqa: S105 - a secret's name


class ReportsAccepted(msgspec.Struct, kw_only=True):
    reports: int
    """Reports the request carried that we act on (a transient bounce, for one, is not)."""
    stored: int
    """How many of them were new (a provider's retry stores nothing new)."""
    confirmed: bool = False
    """An SNS subscription confirmation was confirmed."""


async def _workspace_secret(runtime: Runtime, workspace_id: int, name: str) -> str | None:
    cache = runtime.resources.require(FunnelsDeps).provider_secrets
    hit = cache.get((workspace_id, name))
    if hit is not None:
        return hit
    async with runtime.db.read() as session:
        value = await get_secret(session, runtime.secrets, workspace_id=workspace_id, name=name)
    if value is not None:  # a missing secret is looked up again: it may be set any moment
        cache.put((workspace_id, name), value)
    return value


async def _store_reports(
    runtime: Runtime, workspace_id: int, provider: str, reports: list[Report]
) -> int:
    stored = 0
    for report in reports:
        new = await store_event(
            runtime,
            workspace_id=workspace_id,
            source="delivery",
            name=report.kind,
            external_id=report.external_id,
            payload={
                "provider": provider,
                "message_ids": report.message_ids,
                "email": report.email,
                "url": report.url,
            },
        )
        stored += new is not None
    return stored


def _verifier(runtime: Runtime) -> SnsVerifier:
    return runtime.resources.require(FunnelsDeps).sns


@post("/hooks/funnels/{workspace_id:int}/ses", status_code=200)
async def ses_webhook(
    request: Request[Any, Any, Any], runtime: CurrentRuntime, workspace_id: FromPath[int]
) -> ReportsAccepted:
    """Amazon SES notifications delivered by SNS (bounces, complaints, deliveries, opens,
    clicks)."""
    body = await request.body()
    check_json(body)
    topics = await _workspace_secret(runtime, workspace_id, SES_TOPICS_SECRET)
    allowed = {t.strip() for t in (topics or "").split(",") if t.strip()}
    if not allowed:
        raise Unauthorized(f"configure the SNS topic ARN(s) as the secret {SES_TOPICS_SECRET}")
    try:
        message = await _verifier(runtime).verify(body)
    except SnsError as exc:
        raise Unauthorized(str(exc)) from None
    if message.topic_arn not in allowed:
        raise Unauthorized(f"topic {message.topic_arn} is not configured for this workspace")
    if message.type == "SubscriptionConfirmation":
        try:
            await _verifier(runtime).confirm(message)
        except SnsError as exc:
            raise ValidationFailed.field("SubscribeURL", str(exc)) from None
        return ReportsAccepted(reports=0, stored=0, confirmed=True)
    if message.type != "Notification":
        return ReportsAccepted(reports=0, stored=0)
    check_json(message.message.encode(), where="Message")
    try:
        reports = from_ses(ses_event(message), message.message_id)
    except SnsError as exc:
        raise ValidationFailed.field("Message", str(exc)) from None
    stored = await _store_reports(runtime, workspace_id, "ses", reports)
    return ReportsAccepted(reports=len(reports), stored=stored)


@post("/hooks/funnels/{workspace_id:int}/mailgun", status_code=200)
async def mailgun_webhook(
    request: Request[Any, Any, Any], runtime: CurrentRuntime, workspace_id: FromPath[int]
) -> ReportsAccepted:
    """Mailgun event webhooks (delivered, failed permanently, opened, clicked, unsubscribed,
    complained)."""
    key = await _workspace_secret(runtime, workspace_id, MAILGUN_KEY_SECRET)
    if not key:
        raise Unauthorized(f"configure the Mailgun signing key as the secret {MAILGUN_KEY_SECRET}")
    raw = await request.body()
    check_json(raw)
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise ValidationFailed.field("body", "not valid JSON") from None
    if not isinstance(body, dict) or not verify_mailgun(key, body):
        raise Unauthorized("the Mailgun signature does not match")
    reports = from_mailgun(body)
    stored = await _store_reports(runtime, workspace_id, "mailgun", reports)
    return ReportsAccepted(reports=len(reports), stored=stored)


ROUTES: list[Any] = [ses_webhook, mailgun_webhook]
