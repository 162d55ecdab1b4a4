"""Sending a run's digests (spec AR-27): once the run's last account job finished, each channel
of the rule is claimed once (a row in ``adrules_digests``, unique per run and channel) and gets one
message, whatever the number of accounts, objects and job retries.

E-mail goes through the mail sender; the three webhook formats through the guarded HTTP client
(address guard, the ``ADRULES_WEBHOOK_TIMEOUT_SECONDS`` timeout, its retry policy); the platform
stop is asked immediately before sending. A shadow run sends nothing (spec AR-1a).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy import func, update

from app.db.dialect import insert_ignoring
from app.db.tenancy import scoped_select
from app.engines.adrules.approvals import links
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.digest_states import DIGESTS
from app.engines.adrules.models import (
    BATCH_DEFERRED,
    BATCH_QUEUED,
    BATCH_RUNNING,
    Batch,
)
from app.engines.adrules.notify.channels import Channel, rule_channels
from app.engines.adrules.notify.digest import Digest, RecordRow, build_digest, worth_sending
from app.engines.adrules.notify.formats import (
    email_subject,
    email_text,
    json_body,
    slack_body,
    teams_body,
)
from app.engines.adrules.notify_models import (
    DIGEST_FAILED,
    DIGEST_SENDING,
    DIGEST_SENT,
    DIGEST_SKIPPED,
    PROPOSAL_PENDING,
    Proposal,
)
from app.engines.adrules.notify_models import (
    Digest as DigestRow,
)
from app.engines.adrules.payloads import RunAccountPayload
from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import NotifyEmail, NotifyWebhook
from app.engines.adrules.webhook_secrets import chat_url, open_secret
from app.engines.adrules.work.changes import render_template
from app.integrations.http_guard import HttpRequest, OutboundError
from app.integrations.http_guard.signature import SIGNATURE_HEADER, sign_webhook
from app.integrations.mail import MailError, OutgoingEmail
from app.platform.models import Workspace
from app.platform.service import webhook_secret

log = logging.getLogger(__name__)

UNFINISHED = (BATCH_QUEUED, BATCH_RUNNING, BATCH_DEFERRED)


class DigestFailed(Exception):
    """The channel refused or could not be reached."""


def run_url(public_url: str, batch_record_id: int) -> str:
    return f"{public_url.rstrip('/')}/ui/adrules/log/{batch_record_id}"


async def send_run_digests(deps: AdRulesDeps, payload: RunAccountPayload) -> int:
    """Send the run's digests when the run is over; returns how many this call sent."""
    rule = payload.rule
    channels = rule_channels(rule)
    if rule.shadow or not channels:
        return 0
    async with deps.db.read() as session:
        batches = (
            await session.execute(
                scoped_select(
                    Batch, payload.workspace_id, Batch.id, Batch.status, Batch.account_meta_id
                )
                .where(Batch.batch_id == payload.batch_id)
                .order_by(Batch.id)
            )
        ).all()
        if any(status in UNFINISHED for _, status, _ in batches):
            return 0  # another account of the run is still going: the last one sends
        rows = await _record_rows(session, payload)
        expiry = await session.scalar(
            scoped_select(Proposal, payload.workspace_id, func.min(Proposal.expires_at)).where(
                Proposal.batch_id == payload.batch_id, Proposal.status == PROPOSAL_PENDING
            )
        )
        workspace = await session.get(Workspace, payload.workspace_id)
    if workspace is None:
        return 0
    approve = None
    if expiry is not None:
        token = links.sign(
            webhook_secret(deps.secrets, workspace),
            workspace_id=payload.workspace_id,
            batch_id=payload.batch_id,
            expires_at=expiry,
        )
        approve = links.approve_url(deps.public_url, token)
    now = deps.clock.now()
    digest = build_digest(
        rows,
        rule_id=rule.id,
        rule_name=rule.name,
        batch_id=payload.batch_id,
        at=now,
        level=rule.level,
        accounts=[meta for _, _, meta in batches],
        run_url=run_url(deps.public_url, batches[0][0] if batches else payload.batch_record_id),
        approve_url=approve,
        approve_until=expiry,
    )
    sent = 0
    for channel in channels:
        if not worth_sending(rows, channel.task_ids):
            continue
        claimed = await _claim(deps, payload, channel, len(rows), now)
        if claimed is None:
            continue  # another job of the run has this channel
        sent += await _send_claimed(deps, payload, channel, digest, claimed, workspace)
    return sent


async def _record_rows(session: Any, payload: RunAccountPayload) -> list[RecordRow]:
    result = await session.execute(
        scoped_select(
            ExecutionRecord,
            payload.workspace_id,
            ExecutionRecord.task_id,
            ExecutionRecord.campaign_id,
            ExecutionRecord.campaign_name,
            ExecutionRecord.action,
            ExecutionRecord.status,
            ExecutionRecord.reason,
            ExecutionRecord.before,
            ExecutionRecord.after,
            ExecutionRecord.conditions,
        ).where(ExecutionRecord.batch_id == payload.batch_id)
    )
    return [RecordRow(*row) for row in result.all()]


async def _claim(
    deps: AdRulesDeps, payload: RunAccountPayload, channel: Channel, objects: int, now: datetime
) -> int | None:
    """Insert the run's row for ``channel``; None when it exists (sent or being sent)."""
    async with deps.db.write() as uow:
        statement = insert_ignoring(
            uow.session, DigestRow.__table__, [DigestRow.batch_id, DigestRow.channel_key]
        ).returning(DigestRow.id)
        return await uow.session.scalar(
            statement,
            [
                {
                    "workspace_id": payload.workspace_id,
                    "rule_id": payload.rule.id,
                    "batch_id": payload.batch_id,
                    "channel_key": channel.key,
                    "channel": channel.kind,
                    **DIGESTS.create(DIGEST_SENDING),
                    "objects": objects,
                    "created_at": now,
                }
            ],
        )


async def _send_claimed(
    deps: AdRulesDeps,
    payload: RunAccountPayload,
    channel: Channel,
    digest: Digest,
    digest_id: int,
    workspace: Workspace,
) -> int:
    status, detail = DIGEST_SENT, None
    stopped = await deps.stop.reason(payload.workspace_id) if deps.stop else None
    if stopped is not None:
        status, detail = DIGEST_SKIPPED, stopped
    else:
        try:
            detail = await _deliver(deps, channel, digest, bool(workspace.allow_private_http))
        except (DigestFailed, MailError, OutboundError) as exc:
            status, detail = DIGEST_FAILED, str(exc)[:2000]
            log.warning(
                "ad rules digest failed: batch %s channel %s: %s",
                payload.batch_id,
                channel.kind,
                detail,
            )
    async with deps.db.write() as uow:
        await uow.session.execute(
            DIGESTS.transition(update(DigestRow).where(DigestRow.id == digest_id), status).values(
                detail=detail,
                sent_at=deps.clock.now() if status == DIGEST_SENT else None,
            )
        )
    return 1 if status == DIGEST_SENT else 0


async def _deliver(
    deps: AdRulesDeps, channel: Channel, digest: Digest, allow_private: bool
) -> str | None:
    action = channel.action
    if isinstance(action, NotifyEmail):
        if deps.mail is None:
            raise DigestFailed("e-mail is not configured")
        await deps.mail.send(
            OutgoingEmail(
                to=list(action.recipients),
                subject=email_subject(action.subject, digest, render_template),
                text=email_text(digest),
                # Stable per run and channel: a retried send carries the same Message-ID.
                message_id=f"adrules.{digest.batch_id}.{channel.key}@sweepline",
                headers={"X-Sweepline-Rule": str(digest.rule_id)},
            )
        )
        return None
    return await _post(deps, action, channel, digest, allow_private)


async def _post(
    deps: AdRulesDeps,
    action: NotifyWebhook,
    channel: Channel,
    digest: Digest,
    allow_private: bool,
) -> str | None:
    if deps.webhook_http is None:
        raise DigestFailed("outbound HTTP is not configured")
    headers = {"Content-Type": "application/json"}
    url = action.url
    if action.format in ("slack", "teams"):
        url = chat_url(action, deps.secrets)
    if action.format == "slack":
        body = msgspec.json.encode(slack_body(digest))
    elif action.format == "teams":
        body = msgspec.json.encode(teams_body(digest))
    else:
        body = msgspec.json.encode(json_body(digest))
        secret = open_secret(action, deps.secrets)
        if secret is None:
            raise DigestFailed("the webhook has no signing secret")
        headers[SIGNATURE_HEADER] = sign_webhook(secret, body, int(digest.at.timestamp()))
    result = await deps.webhook_http.request(
        HttpRequest(method="POST", url=url, headers=headers, body=body.decode()),
        allow_private=allow_private,
        idempotency_key=f"adrules:digest:{digest.batch_id}:{channel.key}",
    )
    if not 200 <= result.status < 300:
        raise DigestFailed(f"the receiver answered {result.status}: {result.body[:200]}")
    return f"{result.status} {result.body[:200]}".strip()
