"""Delivery reports in the mail providers' native webhook formats (beside the generic
``POST /hooks/funnels/delivery``), each verified the provider's own way:

- ``POST /hooks/funnels/{workspace}/ses``: Amazon SES through an SNS HTTPS subscription. The SNS
  signature is verified against the certificate at ``SigningCertURL`` (allowed URLs only) and the
  ``TopicArn`` must be one of the workspace secret ``funnels.ses.topic_arns`` (comma separated):
  a verified signature only proves that *some* SNS topic sent it. A verified
  ``SubscriptionConfirmation`` from an allowed topic is confirmed by visiting its SubscribeURL.
- ``POST /hooks/funnels/{workspace}/mailgun``: Mailgun webhooks, signed with the workspace
  secret ``funnels.mailgun.signing_key`` (Mailgun's "HTTP webhook signing key"). The signature
  covers only its timestamp and token: one older than 15 minutes, or a token used before, is
  refused (the token is claimed in the transaction that stores the reports).
- ``POST /hooks/funnels/{workspace}/sendgrid``: SendGrid's signed Event Webhook, verified with
  the workspace secret ``funnels.sendgrid.verification_key`` (the webhook's verification key).
- ``POST /hooks/funnels/{workspace}/postmark``: Postmark webhooks, which are not signed: the
  credentials set on the webhook, basic auth (secret ``funnels.postmark.basic_auth``,
  ``user:password``) and/or a custom header (secret ``funnels.postmark.header``, ``Name: value``).

A request that fails verification is a 401 and stores nothing.

Each report becomes one stored inbound delivery event (idempotent on the provider's event id) and
is applied off the request path like every other event.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
from litestar import Request, post
from litestar.params import FromPath

from app.engines.funnels.deps import FunnelsDeps
from app.engines.funnels.events.records.report_nonces import ReportRow, store_once
from app.errors import Unauthorized, ValidationFailed
from app.integrations.mail import postmark, sendgrid
from app.integrations.mail.reports import (
    MAILGUN_TOLERANCE_SECONDS,
    MailgunRefused,
    Report,
    from_mailgun,
    from_ses,
    verify_mailgun,
)
from app.integrations.mail.sns import SnsError, SnsVerifier, ses_event
from app.platform.service import get_secret
from app.runtime import Runtime
from app.web.auth import CurrentRuntime
from app.web.hooks.funnels_public import store_event
from app.web.id_bounds import within_id_bounds
from app.web.input_guard import check_json

SES_TOPICS_SECRET = "funnels.ses.topic_arns"  # noqa: S105 - a secret's name
MAILGUN_KEY_SECRET = "funnels.mailgun.signing_key"  # noqa: S105 - a secret's name
SENDGRID_KEY_SECRET = "funnels.sendgrid.verification_key"  # noqa: S105 - a secret's name
POSTMARK_AUTH_SECRET = "funnels.postmark.basic_auth"  # noqa: S105 - a secret's name
POSTMARK_HEADER_SECRET = "funnels.postmark.header"  # noqa: S105 - a secret's name


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


def _payload(provider: str, report: Report) -> dict[str, Any]:
    return {
        "provider": provider,
        "message_ids": report.message_ids,
        "email": report.email,
        "url": report.url,
    }


def _json(raw: bytes) -> Any:
    check_json(raw)
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise ValidationFailed.field("body", "not valid JSON") from None


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
            payload=_payload(provider, report),
        )
        stored += new is not None
    return stored


def _verifier(runtime: Runtime) -> SnsVerifier:
    return runtime.resources.require(FunnelsDeps).sns


@post("/hooks/funnels/{workspace_id:int}/ses", status_code=200, guards=[within_id_bounds])
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


@post("/hooks/funnels/{workspace_id:int}/mailgun", status_code=200, guards=[within_id_bounds])
async def mailgun_webhook(
    request: Request[Any, Any, Any], runtime: CurrentRuntime, workspace_id: FromPath[int]
) -> ReportsAccepted:
    """Mailgun event webhooks (delivered, failed permanently, opened, clicked, unsubscribed,
    complained)."""
    key = await _workspace_secret(runtime, workspace_id, MAILGUN_KEY_SECRET)
    if not key:
        raise Unauthorized(f"configure the Mailgun signing key as the secret {MAILGUN_KEY_SECRET}")
    body = _json(await request.body())
    now = runtime.clock.now()
    if not isinstance(body, dict):
        raise Unauthorized("the Mailgun signature is missing")
    try:
        signed = verify_mailgun(key, body, int(now.timestamp()))
    except MailgunRefused as exc:
        raise Unauthorized(str(exc)) from None
    reports = from_mailgun(body)
    stored = await store_once(
        runtime.db,
        workspace_id=workspace_id,
        provider="mailgun",
        nonce=signed.token,
        # Remembered until its timestamp is refused anyway.
        expires_at=datetime.fromtimestamp(signed.timestamp + MAILGUN_TOLERANCE_SECONDS + 1, UTC),
        reports=[ReportRow(r.kind, r.external_id, _payload("mailgun", r)) for r in reports],
        now=now,
    )
    if stored is None:
        raise Unauthorized("the Mailgun signature's token was used before")
    if stored:
        await runtime.resources.require(FunnelsDeps).processing.request(now)
    return ReportsAccepted(reports=len(reports), stored=stored)


@post("/hooks/funnels/{workspace_id:int}/sendgrid", status_code=200, guards=[within_id_bounds])
async def sendgrid_webhook(
    request: Request[Any, Any, Any], runtime: CurrentRuntime, workspace_id: FromPath[int]
) -> ReportsAccepted:
    """SendGrid's signed Event Webhook (a JSON array of events: bounces, drops, spam reports,
    unsubscribes, deliveries, opens, clicks)."""
    key = await _workspace_secret(runtime, workspace_id, SENDGRID_KEY_SECRET)
    if not key:
        raise Unauthorized(
            f"configure the SendGrid verification key as the secret {SENDGRID_KEY_SECRET}"
        )
    raw = await request.body()
    try:
        sendgrid.verify(
            key,
            request.headers.get(sendgrid.TIMESTAMP_HEADER, ""),
            request.headers.get(sendgrid.SIGNATURE_HEADER, ""),
            raw,
            int(runtime.clock.now().timestamp()),
        )
    except sendgrid.SendGridRefused as exc:
        raise Unauthorized(str(exc)) from None
    events = _json(raw)
    if not isinstance(events, list):
        raise ValidationFailed.field("body", "SendGrid posts a JSON array of events")
    reports = sendgrid.from_sendgrid(events)
    stored = await _store_reports(runtime, workspace_id, "sendgrid", reports)
    return ReportsAccepted(reports=len(reports), stored=stored)


@post("/hooks/funnels/{workspace_id:int}/postmark", status_code=200, guards=[within_id_bounds])
async def postmark_webhook(
    request: Request[Any, Any, Any], runtime: CurrentRuntime, workspace_id: FromPath[int]
) -> ReportsAccepted:
    """Postmark webhooks (bounces, spam complaints, subscription changes, deliveries, opens,
    clicks), one record a request."""
    basic_auth = await _workspace_secret(runtime, workspace_id, POSTMARK_AUTH_SECRET)
    header = await _workspace_secret(runtime, workspace_id, POSTMARK_HEADER_SECRET)
    try:
        postmark.check_credentials(request.headers, basic_auth=basic_auth, header=header)
    except postmark.PostmarkRefused as exc:
        raise Unauthorized(
            f"{exc} (set the secret {POSTMARK_AUTH_SECRET} or {POSTMARK_HEADER_SECRET})"
        ) from None
    record = _json(await request.body())
    if not isinstance(record, dict):
        raise ValidationFailed.field("body", "Postmark posts one JSON object a record")
    reports = postmark.from_postmark(record)
    stored = await _store_reports(runtime, workspace_id, "postmark", reports)
    return ReportsAccepted(reports=len(reports), stored=stored)


ROUTES: list[Any] = [ses_webhook, mailgun_webhook, sendgrid_webhook, postmark_webhook]
