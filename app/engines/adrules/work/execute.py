"""The 11 actions (spec §4, AR-17, AR-21): the only ad-rules code that writes to the Graph API.

What to write is worked out by the pure functions of :mod:`~app.engines.adrules.work.changes`
(clamping included); :class:`ActionRunner` carries it out. Budget and name actions **re-read the
live value** from Meta immediately before planning the write, so a budget changed since the dispatch
is the one the change starts from. The worker re-reads a task's campaigns together in batched GETs
and writes them in batched POSTs (:meth:`ActionRunner.read_live`, :meth:`ActionRunner.write`,
at most 50 a call), each object's failure its own.

Notifications: ``notify_email`` sends through SMTP; ``notify_webhook`` POSTs a JSON body signed
with HMAC-SHA256 (:func:`sign_webhook` / :func:`verify_webhook`); ``log_only`` changes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

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
from app.engines.adrules.work.batched import (
    CONCURRENT_CALLS,
    BatchStats,
    Refused,
    Sleep,
    send_in_batches,
)
from app.engines.adrules.work.changes import (
    ActionFailed,
    Change,
    minor_units,
    plan_budget,
    plan_name,
    plan_status,
    render_template,
)
from app.engines.adrules.work.evaluate import ConditionResult
from app.engines.adrules.work.metrics import local_time
from app.integrations.http_guard import GuardedHttp, HttpRequest
from app.integrations.http_guard.signature import SIGNATURE_HEADER as SIGNATURE_HEADER
from app.integrations.http_guard.signature import sign_webhook as sign_webhook
from app.integrations.http_guard.signature import verify_webhook as verify_webhook
from app.integrations.mail import MailSender, OutgoingEmail
from app.integrations.meta.errors import MetaError, decode_error
from app.integrations.meta.reader import MAX_BATCH, BatchGet, MetaReader
from app.integrations.meta.retry import RETRY_DELAYS
from app.integrations.meta.structs import BatchReply, GraphCampaign
from app.integrations.meta.writer import MetaWriter, Update, confirmed
from app.platform.crypto import SecretBox

LIVE_FIELDS = ("id", "name", "daily_budget", "lifetime_budget")
"""What the live re-read before a budget or name write asks for."""

_live = msgspec.json.Decoder(GraphCampaign)


def needs_live_read(action: Action) -> bool:
    """Budget and name actions re-read the live value immediately before writing (AR-17)."""
    return isinstance(
        action, IncreaseBudget | DecreaseBudget | SetBudget | Rename | AppendToName | RemoveFromName
    )


async def _no_sleep(_: float) -> None:
    return None


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
    level: str = "campaign"
    """The rule's level: the object acted on is a campaign, an ad set or an ad."""


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
BeforeCall = Callable[[], Awaitable[str | None]]
"""Asked before each write call; a reason keeps the call from being made."""
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
    sleep: Sleep = _no_sleep
    """Waits between rounds of a batch's unfinished items."""
    retry_delays: tuple[float, ...] = RETRY_DELAYS
    max_wait_seconds: float = 60.0
    batch_size: int = MAX_BATCH
    """Sub-requests per batch call of the live re-reads and the writes (≤ 50)."""
    stats: BatchStats = field(default_factory=BatchStats)
    """Batch calls made for re-reads and writes (benchmarks and tests read it)."""
    concurrency: int = CONCURRENT_CALLS
    """Batch calls in flight at once."""

    async def read_live(
        self, ids: Sequence[str], fields: Sequence[str] = LIVE_FIELDS
    ) -> dict[str, GraphCampaign | MetaError]:
        """The live values of ``ids`` read in batched GETs (≤ 50 per call); a failed item is that
        object's error only."""
        if not ids:
            return {}
        requests = [BatchGet(path=i, params={"fields": list(fields)}) for i in ids]
        results = await send_in_batches(
            requests,
            self.reader.batch,
            sleep=self.sleep,
            retry_delays=self.retry_delays,
            max_wait_seconds=self.max_wait_seconds,
            size=self.batch_size,
            stats=self.stats,
            concurrency=self.concurrency,
        )
        out: dict[str, GraphCampaign | MetaError] = {}
        for object_id, result in zip(ids, results, strict=True):
            if result.error is not None:
                out[object_id] = result.error
                continue
            try:
                out[object_id] = _live.decode(result.body or b"")
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                out[object_id] = decode_error("live object", exc)
        return out

    async def write(
        self, updates: Sequence[Update], before_call: BeforeCall | None = None
    ) -> dict[str, MetaError | str | None]:
        """Carry out ``updates`` in batched POSTs (≤ 50 per call); per object, None when Meta
        confirmed the write, else its error (the other objects are unaffected). ``before_call``
        is asked immediately before each call: a reason it returns keeps that call's objects
        unwritten, and is their result."""

        async def send(chunk: Sequence[Update]) -> list[BatchReply | None]:
            if before_call is not None:
                reason = await before_call()
                if reason is not None:
                    raise Refused(reason)
            return await self.writer.batch_update(chunk)

        if not updates:
            return {}
        results = await send_in_batches(
            updates,
            send,
            sleep=self.sleep,
            retry_delays=self.retry_delays,
            max_wait_seconds=self.max_wait_seconds,
            size=self.batch_size,
            stats=self.stats,
            concurrency=self.concurrency,
        )
        return {
            r.item.object_id: r.refused
            if r.refused is not None
            else r.error
            if r.error is not None
            else confirmed(r.body or b"")
            for r in results
        }

    def plan(
        self,
        action: Action,
        campaign: CampaignRef,
        scope: ActionScope,
        live: GraphCampaign | None,
    ) -> Change:
        """What ``action`` would write, from the live values (budget and name actions) or the
        status the dispatch saw (status actions). Raises :class:`ActionFailed`."""
        if isinstance(action, PauseCampaign | ActivateCampaign):
            return plan_status(action, campaign.effective_status)
        if live is None:
            raise ActionFailed("the live values were not read")
        if isinstance(action, IncreaseBudget | DecreaseBudget | SetBudget):
            return plan_budget(
                action,
                minor_units(live.daily_budget),
                scope.currency,
                lifetime_minor=minor_units(live.lifetime_budget),
                level=scope.level,
            )
        assert isinstance(action, Rename | AppendToName | RemoveFromName)
        return plan_name(
            action,
            live.name,
            rule=scope.rule_name,
            date=f"{local_time(scope.now, scope.timezone):%Y-%m-%d}",
            campaign_id=campaign.id,
        )

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
        if isinstance(action, NotifyEmail | NotifyWebhook):
            return await self._notify(action, campaign, scope, conditions, outcome, dry_run)
        return await self._change(action, campaign, scope, guard, outcome, dry_run)

    async def _notify(
        self,
        action: NotifyEmail | NotifyWebhook,
        campaign: CampaignRef,
        scope: ActionScope,
        conditions: list[ConditionResult],
        outcome: ActionOutcome,
        dry_run: bool,
    ) -> ActionOutcome:
        """An e-mail or a signed webhook about the campaign (a shadow rule says where to)."""
        outcome.executed = True
        if dry_run:
            if isinstance(action, NotifyEmail):
                outcome.after = {"would_send_to": list(action.recipients)}
            else:
                outcome.after = {"would_post_to": action.url}
            return outcome
        started = self.timer()
        if isinstance(action, NotifyEmail):
            await self._email(action, campaign, scope, conditions)
            outcome.after = {"sent_to": list(action.recipients)}
        else:
            status = await self._webhook(action, campaign, scope, conditions)
            outcome.after = {"status": status}
        outcome.steps.append(("notify", self.timer() - started))
        return outcome

    async def _change(
        self,
        action: Action,
        campaign: CampaignRef,
        scope: ActionScope,
        guard: WriteGuard | None,
        outcome: ActionOutcome,
        dry_run: bool,
    ) -> ActionOutcome:
        """A change to the campaign: planned from its live value where the action needs it,
        checked by the guards, then written (a shadow rule stops before the write)."""
        live: GraphCampaign | None = None
        if needs_live_read(action):
            # Budget and name actions start from the live value, not the one in the job.
            started = self.timer()
            read = (await self.read_live([campaign.id]))[campaign.id]
            outcome.steps.append(("live_read", self.timer() - started))
            if isinstance(read, MetaError):
                raise read
            live = read
        change = self.plan(action, campaign, scope, live)
        if change.write is None:
            outcome.reason = change.noop
            return outcome
        if guard is not None:
            refused = await guard(change)
            if refused is not None:
                outcome.refused = refused
                outcome.before, outcome.after = change.before, change.after
                return outcome
        if not dry_run:
            started = self.timer()
            failed = (await self.write([Update(campaign.id, change.write)]))[campaign.id]
            outcome.steps.append(("write", self.timer() - started))
            if isinstance(failed, MetaError):
                raise failed
        outcome.executed = True
        outcome.before, outcome.after = change.before, change.after
        return outcome

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
