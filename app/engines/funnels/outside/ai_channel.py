"""The ``ai`` channel (``ai_generate``): text generated at send time, cache first (free), then
the organisation's token quota, then the call; what a call costs is settled against its
reservation in the same transaction as its ledger line, the cache entry and the result.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.engines.funnels.outbox.channel import LeasedEffect
from app.engines.funnels.outbox.payloads import Ai
from app.engines.funnels.outside import ai_ledger
from app.engines.funnels.outside.channel_base import OutsideChannel, Refused
from app.engines.funnels.outside.config import Provider
from app.engines.funnels.outside.results import Outcome, record_in
from app.integrations.ai import build_messages, estimate_tokens, may_have_been_billed
from app.platform.models import Workspace


class AiChannel(OutsideChannel[Ai]):
    """``ai_generate``: cache first (free), then the organisation's quota, then the call."""

    kind = "ai"
    payload_type = Ai

    async def call(self, effect: LeasedEffect, p: Ai, provider: Provider | None) -> dict[str, Any]:
        assert provider is not None
        ws = effect.workspace_id
        now = self.deps.clock.now
        async with self.deps.db.read() as session:
            hit = await ai_ledger.cached_text(session, ws, p.cache_key)
            org = await session.scalar(select(Workspace.organisation_id).where(Workspace.id == ws))
        if hit is not None:
            # Another contact with the same inputs paid for it meanwhile.
            return {"text": hit, "cached": True, "tokens": 0}
        if org is None:
            raise Refused("the workspace no longer exists")
        creative = p.creative
        messages = build_messages(creative, p.prompt)
        estimate = estimate_tokens(messages, creative.max_tokens)
        async with self.deps.db.write() as uow:
            decision = await ai_ledger.reserve(uow.session, org, estimate, now())
            if not decision.allowed:
                await ai_ledger.log_usage(
                    uow.session,
                    organisation_id=org,
                    workspace_id=ws,
                    key=effect.idempotency_key,
                    outcome="refused",
                    tokens=0,
                    model=creative.model,
                    detail=f"quota {decision.reason}",
                    now=now(),
                )
        if not decision.allowed:
            raise QuotaExhausted(
                f"AI quota {decision.reason}: {decision.remaining_tokens or 0} tokens left this "
                f"month, about {estimate} needed",
            )
        client = self.deps.clients.ai(provider)
        try:
            completion = await client.complete(
                messages,
                model=creative.model,
                max_tokens=creative.max_tokens,
                temperature=creative.temperature,
            )
        except BaseException as exc:
            await self._settle_failed(effect, org, creative.model, estimate, exc)
            raise
        tokens = completion.usage.total_tokens
        result = {"text": completion.text, "cached": False, "tokens": tokens}
        async with self.deps.db.write() as uow:
            # One transaction: the spend, its ledger line, the cache entry and the result.
            await ai_ledger.settle(uow.session, org, estimate, tokens, now())
            await ai_ledger.log_usage(
                uow.session,
                organisation_id=org,
                workspace_id=ws,
                key=effect.idempotency_key,
                outcome="generated",
                tokens=tokens,
                model=completion.model,
                detail=completion.finish_reason or "",
                now=now(),
            )
            await ai_ledger.cache_text(
                uow.session,
                workspace_id=ws,
                key=p.cache_key,
                text=completion.text,
                model=completion.model,
                tokens=tokens,
                now=now(),
            )
            await record_in(
                uow.session,
                outbox_id=effect.id,
                workspace_id=ws,
                outcome=Outcome(True, result, None),
                run_id=p.run_id,
                node_id=p.node_id,
                now=now(),
            )
        return result

    async def _settle_failed(
        self, effect: LeasedEffect, org: int, model: str, estimate: int, error: BaseException
    ) -> None:
        """A failed call gives its reservation back, unless the provider may have billed it (its
        reply was lost): then the reservation, the call's upper bound, stays spent and has its
        ledger line, so the retry's call is counted beside it, never instead of it."""
        now = self.deps.clock.now
        billed = may_have_been_billed(error)
        async with self.deps.db.write() as uow:
            await ai_ledger.settle(uow.session, org, estimate, estimate if billed else 0, now())
            if billed:
                await ai_ledger.log_usage(
                    uow.session,
                    organisation_id=org,
                    workspace_id=effect.workspace_id,
                    # One line per delivery attempt: each lost reply was a call of its own.
                    key=f"{effect.idempotency_key}#{effect.attempts}",
                    outcome="lost",
                    tokens=estimate,
                    model=model,
                    detail=f"reply lost, counted at its reservation: {error}",
                    now=now(),
                )


class QuotaExhausted(Refused):
    """The organisation's AI quota does not cover this generation."""

    code = "ai_quota_exhausted"
