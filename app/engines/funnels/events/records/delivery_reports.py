"""Delivery reports attributed to the message they are about, for funnel mail as for campaigns.

A funnel message's Message-ID is ``<run-{run}-step-{seq}.w{workspace}@domain>``: the effect's
idempotency key and the workspace. A report that carries only that (a bounce, a complaint, an
unsubscribe relayed by a provider) finds its outbox effect, hence its contact and its message
node, and is recorded as a delivery event of that effect: per-node counts are counts of distinct
effects per kind over those rows, so a repeated report cannot inflate them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from app.db.dialect import insert
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.models import DeliveryEvent, OutboxEffect

_FUNNEL_MESSAGE = re.compile(r"^(run-\d+-step-\d+)\.w(\d+)$")


@dataclass(frozen=True, slots=True)
class FunnelMessage:
    effect_key: str
    workspace_id: int


def parse_funnel_message_id(message_id: str) -> FunnelMessage | None:
    """``<run-3105-step-1.w1@domain>`` → the effect key and workspace; ``None`` otherwise."""
    local = message_id.strip().strip("<>").partition("@")[0]
    match = _FUNNEL_MESSAGE.match(local)
    if match is None:
        return None
    return FunnelMessage(match.group(1), int(match.group(2)))


@dataclass(frozen=True, slots=True)
class EffectOf:
    outbox_id: int
    contact_id: int
    node_id: str


async def effect_of(session: ReadSession, workspace_id: int, effect_key: str) -> EffectOf | None:
    """The outbox effect of a funnel message in this workspace."""
    row = (
        await session.execute(
            scoped_select(
                OutboxEffect,
                workspace_id,
                OutboxEffect.id,
                OutboxEffect.contact_id,
                OutboxEffect.node_id,
            ).where(OutboxEffect.idempotency_key == effect_key)
        )
    ).first()
    return None if row is None else EffectOf(int(row[0]), int(row[1]), str(row[2]))


async def record_funnel_report(
    session: WriteSession,
    *,
    workspace_id: int,
    effect_key: str,
    kind: str,
    detail: str,
    at: datetime,
) -> EffectOf | None:
    """Record a report (delivered, opened, clicked, bounced, complained, unsubscribed) about a
    funnel message; the effect it is about, ``None`` when this workspace sent no such message."""
    effect = await effect_of(session, workspace_id, effect_key)
    if effect is None:
        return None
    await session.execute(
        insert(session, DeliveryEvent).values(
            workspace_id=workspace_id,
            outbox_id=effect.outbox_id,
            contact_id=effect.contact_id,
            kind=kind,
            detail=detail[:2000],
            at=at,
        )
    )
    return effect
