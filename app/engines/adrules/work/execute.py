"""The 11 actions (spec §4, AR-17, AR-21): the only ad-rules code that writes to the Graph API.

What to write is worked out by the pure functions of :mod:`~app.engines.adrules.work.changes`
(clamping included); :class:`ActionRunner` carries it out. Budget and name actions **re-read the
live value** from Meta immediately before planning the write, so a budget changed since the dispatch
is the one the change starts from. The worker re-reads a task's campaigns together in batched GETs
and writes them in batched POSTs (:meth:`ActionRunner.read_live`, :meth:`ActionRunner.write`,
at most 50 a call), each object's failure its own.

Notifications: ``notify_email`` and ``notify_webhook`` put the campaign into the run's digest for
their channel (:mod:`app.engines.adrules.notify` sends one message per run and channel: e-mail,
a signed JSON webhook signed with HMAC-SHA256 — :func:`sign_webhook` / :func:`verify_webhook` —,
Slack or Teams); ``log_only`` changes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from app.engines.adrules.notify.channels import channel_label
from app.engines.adrules.schemas import (
    Action,
    ActivateCampaign,
    AppendToName,
    DecreaseBid,
    DecreaseBudget,
    IncreaseBid,
    IncreaseBudget,
    LogOnly,
    NotifyEmail,
    NotifyWebhook,
    PauseCampaign,
    RemoveFromName,
    Rename,
    SetBid,
    SetBudget,
)
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
    plan_bid,
    plan_budget,
    plan_name,
    plan_status,
)
from app.engines.adrules.work.evaluate import ConditionResult
from app.engines.adrules.work.metrics import local_time
from app.integrations.http_guard import GuardedHttp
from app.integrations.http_guard.signature import SIGNATURE_HEADER as SIGNATURE_HEADER
from app.integrations.http_guard.signature import sign_webhook as sign_webhook
from app.integrations.http_guard.signature import verify_webhook as verify_webhook
from app.integrations.mail import MailSender
from app.integrations.meta.errors import MetaError, decode_error
from app.integrations.meta.reader import MAX_BATCH, BatchGet, MetaReader
from app.integrations.meta.retry import RETRY_DELAYS
from app.integrations.meta.structs import BatchReply, GraphCampaign
from app.integrations.meta.writer import MetaWriter, Update, confirmed
from app.platform.crypto import SecretBox

LIVE_FIELDS = ("id", "name", "daily_budget", "lifetime_budget")
"""What the live re-read before a budget or name write asks for."""
BID_FIELDS = ("bid_amount", "bid_strategy")
"""Added to the re-read when a bid action needs the ad set's cap and strategy."""
BID_ACTION_TYPES = (IncreaseBid, DecreaseBid, SetBid)


def live_fields(actions: Sequence[Action]) -> tuple[str, ...]:
    """The fields one re-read must ask for so that every action of ``actions`` can plan."""
    if any(isinstance(a, BID_ACTION_TYPES) for a in actions):
        return LIVE_FIELDS + BID_FIELDS
    return LIVE_FIELDS


_live = msgspec.json.Decoder(GraphCampaign)


def needs_live_read(action: Action) -> bool:
    """Budget and name actions re-read the live value immediately before writing (AR-17)."""
    return isinstance(
        action,
        IncreaseBudget
        | DecreaseBudget
        | SetBudget
        | Rename
        | AppendToName
        | RemoveFromName
        | IncreaseBid
        | DecreaseBid
        | SetBid,
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
        self,
        ids: Sequence[str],
        fields: Sequence[str] = LIVE_FIELDS,
        before_call: BeforeCall | None = None,
    ) -> dict[str, GraphCampaign | MetaError | str]:
        """The live values of ``ids`` read in batched GETs (≤ 50 per call); a failed item is that
        object's error only. ``before_call`` is asked immediately before each call: a reason it
        returns keeps that call from being made, and is its objects' result (spec AR-43)."""
        if not ids:
            return {}

        async def send(chunk: Sequence[BatchGet]) -> list[BatchReply | None]:
            if before_call is not None:
                reason = await before_call()
                if reason is not None:
                    raise Refused(reason)
            return await self.reader.batch(chunk)

        requests = [BatchGet(path=i, params={"fields": list(fields)}) for i in ids]
        results = await send_in_batches(
            requests,
            send,
            sleep=self.sleep,
            retry_delays=self.retry_delays,
            max_wait_seconds=self.max_wait_seconds,
            size=self.batch_size,
            stats=self.stats,
            concurrency=self.concurrency,
        )
        out: dict[str, GraphCampaign | MetaError | str] = {}
        for object_id, result in zip(ids, results, strict=True):
            if result.refused is not None:
                out[object_id] = result.refused
                continue
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
            return plan_status(action, campaign.effective_status, scope.level)
        if live is None:
            raise ActionFailed("the live values were not read")
        if isinstance(action, IncreaseBid | DecreaseBid | SetBid):
            return plan_bid(
                action,
                minor_units(None if live.bid_amount is None else str(live.bid_amount)),
                live.bid_strategy,
                scope.currency,
            )
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
        """The campaign goes into the run's digest for the action's channel: one message per run
        and channel is sent once the run is over (spec AR-27), never one per campaign."""
        outcome.executed = True
        key = "would_be_in_digest" if dry_run else "in_digest"
        outcome.after = {key: channel_label(action)}
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
            read = (await self.read_live([campaign.id], live_fields([action])))[campaign.id]
            outcome.steps.append(("live_read", self.timer() - started))
            if isinstance(read, MetaError):
                raise read
            assert not isinstance(read, str)  # no stop was asked
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
