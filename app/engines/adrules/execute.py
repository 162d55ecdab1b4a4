"""The 11 actions (spec §4, AR-17, AR-21): the only ad-rules code that writes to the Graph API.

What to write is worked out by the pure functions of :mod:`~app.engines.adrules.changes`
(clamping included); :class:`ActionRunner` carries it out. Budget and name actions **re-read the
live value** from Meta immediately before planning the write, so a budget changed since the dispatch
is the one the change starts from.

Notifications: ``notify_email`` sends through SMTP; ``notify_webhook`` POSTs a JSON body signed
with HMAC-SHA256 (:func:`sign_webhook` / :func:`verify_webhook`); ``log_only`` changes nothing.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from app.engines.adrules.changes import (
    ActionFailed,
    Change,
    minor_units,
    plan_budget,
    plan_name,
    plan_status,
    render_template,
)
from app.engines.adrules.evaluate import ConditionResult
from app.engines.adrules.metrics import local_time
from app.engines.adrules.schemas import (
    Action,
    ActivateCampaign,
    AppendToName,
    DecreaseBudget,
    IncreaseBudget,
    LogOnly,
    NotifyEmail,
    NotifyWebhook,
    PauseCampaign,
    RemoveFromName,
    Rename,
    SetBudget,
)
from app.engines.adrules.webhook_secrets import open_secret
from app.integrations.http_guard import GuardedHttp, HttpRequest
from app.integrations.mail import MailSender, OutgoingEmail
from app.integrations.meta.reader import MetaReader
from app.integrations.meta.writer import MetaWriter
from app.platform.crypto import SecretBox

SIGNATURE_HEADER = "X-Sweepline-Signature"
"""``t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`` (the timestamp stops replays)."""

# -- webhook signature ---------------------------------------------------------------------------


def sign_webhook(secret: str, body: bytes, timestamp: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify_webhook(
    secret: str, header: str, body: bytes, *, now: int, tolerance_seconds: int = 300
) -> bool:
    """What a receiver does: recompute the HMAC and refuse old timestamps (replays)."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        return False
    if abs(now - timestamp) > tolerance_seconds:
        return False
    expected = sign_webhook(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))


# -- carrying it out --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CampaignRef:
    id: str
    name: str
    effective_status: str | None = None


@dataclass(frozen=True, slots=True)
class ActionScope:
    """Who is acting, for templates, messages and idempotency keys."""

    rule_id: int
    rule_name: str
    task_id: int
    task_name: str
    batch_id: str
    account_id: str
    currency: str
    timezone: str
    now: datetime
    allow_private_http: bool = False


@dataclass(slots=True)
class ActionOutcome:
    executed: bool
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    reason: str | None = None
    steps: list[tuple[str, float]] = field(default_factory=list)
    refused: str | None = None
    """A guard refused the planned write (recorded as skipped with this reason)."""


Timer = Callable[[], float]
WriteGuard = Callable[[Change], Awaitable[str | None]]
"""Asked with the planned change just before it is written; a reason refuses it."""


@dataclass
class ActionRunner:
    """Carries out actions for one ad account with one token."""

    reader: MetaReader
    writer: MetaWriter
    mail: MailSender | None
    http: GuardedHttp | None
    timer: Timer
    secrets: SecretBox
    """Opens a webhook's stored signing secret at the moment it signs."""

    async def run(
        self,
        action: Action,
        campaign: CampaignRef,
        scope: ActionScope,
        conditions: list[ConditionResult],
        guard: WriteGuard | None = None,
        *,
        dry_run: bool = False,
    ) -> ActionOutcome:
        """Carry out ``action``; a permanent problem raises :class:`ActionFailed` or ``MetaError``.

        ``dry_run`` (a shadow rule): everything up to the write happens — the live re-read, the
        plan with its clamps, the guards — and the outcome says what would have been written or
        sent; no write and no notification goes out."""
        outcome = ActionOutcome(executed=False)
        if isinstance(action, LogOnly):
            outcome.executed = True
            return outcome
        if dry_run and isinstance(action, NotifyEmail):
            outcome.executed = True
            outcome.after = {"would_send_to": list(action.recipients)}
            return outcome
        if dry_run and isinstance(action, NotifyWebhook):
            outcome.executed = True
            outcome.after = {"would_post_to": action.url}
            return outcome
        if isinstance(action, NotifyEmail | NotifyWebhook):
            started = self.timer()
            if isinstance(action, NotifyEmail):
                await self._email(action, campaign, scope, conditions)
                outcome.after = {"sent_to": list(action.recipients)}
            else:
                status = await self._webhook(action, campaign, scope, conditions)
                outcome.after = {"status": status}
            outcome.steps.append(("notify", self.timer() - started))
            outcome.executed = True
            return outcome
        change = await self._plan_live(action, campaign, scope, outcome)
        if change.write is None:
            outcome.reason = change.noop
            return outcome
        if guard is not None:
            refused = await guard(change)
            if refused is not None:
                outcome.refused = refused
                outcome.before, outcome.after = change.before, change.after
                return outcome
        if dry_run:
            outcome.executed = True
            outcome.before, outcome.after = change.before, change.after
            return outcome
        started = self.timer()
        await self.writer.update_campaign(campaign.id, **change.write)
        outcome.steps.append(("write", self.timer() - started))
        outcome.executed = True
        outcome.before, outcome.after = change.before, change.after
        return outcome

    async def _plan_live(
        self, action: Action, campaign: CampaignRef, scope: ActionScope, outcome: ActionOutcome
    ) -> Change:
        if isinstance(action, PauseCampaign | ActivateCampaign):
            return plan_status(action, campaign.effective_status)
        # Budget and name actions start from the live value, not the one carried in the job.
        started = self.timer()
        live = await self.reader.campaign(campaign.id, fields=("id", "name", "daily_budget"))
        outcome.steps.append(("live_read", self.timer() - started))
        if isinstance(action, IncreaseBudget | DecreaseBudget | SetBudget):
            current = minor_units(live.daily_budget)
            return plan_budget(action, current, scope.currency)
        assert isinstance(action, Rename | AppendToName | RemoveFromName)
        return plan_name(
            action,
            live.name,
            rule=scope.rule_name,
            date=f"{local_time(scope.now, scope.timezone):%Y-%m-%d}",
            campaign_id=campaign.id,
        )

    async def _email(
        self,
        action: NotifyEmail,
        campaign: CampaignRef,
        scope: ActionScope,
        conditions: list[ConditionResult],
    ) -> None:
        if self.mail is None:
            raise ActionFailed("e-mail is not configured")
        date = f"{local_time(scope.now, scope.timezone):%Y-%m-%d}"
        subject = render_template(
            action.subject,
            name=campaign.name,
            rule=scope.rule_name,
            date=date,
            campaign_id=campaign.id,
        )
        lines = [
            f"Rule: {scope.rule_name}",
            f"Task: {scope.task_name or scope.task_id}",
            f"Ad account: {scope.account_id}",
            f"Campaign: {campaign.name} ({campaign.id})",
            f"Run: {scope.batch_id} at {scope.now:%Y-%m-%d %H:%M} UTC",
            "",
            "Conditions:",
            *(
                f"  {'✓' if c.passed else '✗'} {c.text}: saw {c.seen if c.seen is not None else 'no value'}"
                + (f" ({c.reason})" if c.reason else "")
                for c in conditions
            ),
        ]
        await self.mail.send(
            OutgoingEmail(
                to=list(action.recipients),
                subject=subject,
                text="\n".join(lines) + "\n",
                # Stable per effect: a retried job re-sends with the same Message-ID.
                message_id=f"adrules.{scope.batch_id}.{scope.task_id}.{campaign.id}@sweepline",
                headers={"X-Sweepline-Rule": str(scope.rule_id)},
            )
        )

    async def _webhook(
        self,
        action: NotifyWebhook,
        campaign: CampaignRef,
        scope: ActionScope,
        conditions: list[ConditionResult],
    ) -> int:
        if self.http is None:
            raise ActionFailed("outbound HTTP is not configured")
        secret = open_secret(action, self.secrets)
        if secret is None:
            raise ActionFailed("the webhook has no signing secret")
        body = msgspec.json.encode(
            {
                "event": "adrules.task_passed",
                "rule": {"id": scope.rule_id, "name": scope.rule_name},
                "task": {"id": scope.task_id, "name": scope.task_name},
                "ad_account": scope.account_id,
                "campaign": {"id": campaign.id, "name": campaign.name},
                "batch_id": scope.batch_id,
                "at": scope.now.isoformat(),
                "conditions": [msgspec.to_builtins(c) for c in conditions],
            }
        )
        timestamp = int(scope.now.timestamp())
        result = await self.http.request(
            HttpRequest(
                method="POST",
                url=action.url,
                headers={
                    "Content-Type": "application/json",
                    SIGNATURE_HEADER: sign_webhook(secret, body, timestamp),
                },
                body=body.decode(),
            ),
            allow_private=scope.allow_private_http,
            idempotency_key=f"adrules:{scope.batch_id}:{scope.task_id}:{campaign.id}",
        )
        return result.status
