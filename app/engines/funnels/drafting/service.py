"""Draft a funnel from a description (FN-34 to FN-36).

The rounds: ask the workspace's AI provider (the one ``ai_generate`` uses, metered against the
same organisation quota) for a definition under its JSON Schema; read the answer with the
definition's decoder; put the person's trigger and audience on it; check it with the validator a
drawn graph meets (:func:`~app.engines.funnels.definitions.service.check`) and the channel
constraint; while findings remain and repair rounds are left, send the findings back in the
validator's own words. Then, in one transaction: the funnel with the last definition as its
draft (never published: publishing stays a person's act, through the validator again), its
record (prompt, model, endpoint, tokens, rounds, findings) and the simulation of sample contacts.

No transaction is open while the provider is called. A failure before that transaction (quota
spent, the provider down or slow, an answer that is not JSON, no answer that decodes) writes
nothing but the quota's own ledger lines, and says why.
"""

from __future__ import annotations

import secrets as token_source
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from app.clock import Clock
from app.db.session import Database, ReadSession
from app.db.tenancy import scoped_select
from app.engines.funnels.definitions import service as definitions
from app.engines.funnels.definitions.graph import Definition
from app.engines.funnels.definitions.problems import KnownNames, Problem
from app.engines.funnels.drafting import prompt, rounds
from app.engines.funnels.drafting.errors import AiDraftFailed, AiProviderMissing, AiQuotaSpent
from app.engines.funnels.drafting.models import AiDraft
from app.engines.funnels.drafting.samples import simulate_samples
from app.engines.funnels.drafting.schema import response_format
from app.engines.funnels.errors import FunnelNotFound
from app.engines.funnels.outside import ai_ledger, config
from app.engines.funnels.outside.config import AiOptions
from app.integrations.ai import ChatClient, ChatMessage, Completion, estimate_tokens
from app.integrations.ai.quota import may_have_been_billed
from app.integrations.http_guard import NO_RETRY, AddressGuard, OutboundError
from app.integrations.http_guard.user_agent import USER_AGENT
from app.platform import audit
from app.platform.crypto import SecretBox
from app.platform.models import Workspace
from app.settings import FunnelSettings

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True, slots=True)
class DraftingDeps:
    db: Database
    secrets: SecretBox
    guard: AddressGuard
    clock: Clock
    settings: FunnelSettings
    user_agent: str = USER_AGENT
    """``OUTBOUND_USER_AGENT``: the model provider sees the operator's ``User-Agent``."""


@dataclass(slots=True)
class _Round:
    number: int
    asked: list[ChatMessage]
    """The messages this round added to the conversation (the prompt, then repair requests)."""
    completion: Completion
    definition: Definition | None
    findings: list[Problem]


async def draft_funnel(
    deps: DraftingDeps, workspace_id: int, request: prompt.DraftRequest, *, user_id: int | None
) -> AiDraft:
    """Ask, check, repair; store the draft with its record. Never publishes."""
    async with deps.db.read() as session:
        provider = await config.load(session, deps.secrets, workspace_id, "ai")
        known = await definitions.known_names(session, workspace_id)
        organisation_id = await session.scalar(
            select(Workspace.organisation_id).where(Workspace.id == workspace_id)
        )
    if provider is None or not provider.secret:
        raise AiProviderMissing(
            "no AI provider is configured for this workspace: add one (kind 'ai') under the "
            "funnel providers first"
        )
    assert organisation_id is not None  # the workspace exists: the caller is signed in to it
    options: AiOptions = provider.options
    client = ChatClient(
        api_key=provider.secret,
        base_url=provider.base_url,
        timeout=deps.settings.ai_draft_timeout_seconds,
        user_agent=deps.user_agent,
        policy=NO_RETRY,
        clock=deps.clock,
        guard=deps.guard,
    )
    try:
        done = await _converse(deps, client, options, organisation_id, workspace_id, request, known)
    finally:
        await client.aclose()
    last = next((r for r in reversed(done) if r.definition is not None), None)
    if last is None or last.definition is None:
        raise AiDraftFailed(
            f"The AI provider gave no answer that reads as a funnel definition in {len(done)} "
            f"round(s) (last finding: {done[-1].findings[0].message if done else 'none'}). "
            "Nothing was saved."
        )
    return await _store(
        deps,
        workspace_id,
        request,
        user_id=user_id,
        done=done,
        last=last,
        endpoint=f"{provider.base_url}{CHAT_PATH}",
    )


async def _converse(
    deps: DraftingDeps,
    client: ChatClient,
    options: AiOptions,
    organisation_id: int,
    workspace_id: int,
    request: prompt.DraftRequest,
    known: KnownNames,
) -> list[_Round]:
    """Ask, then send the findings back in the validator's words while findings remain and
    repair rounds are left. Every round asked, in order; no transaction is open meanwhile."""
    attempt = f"draft:{token_source.token_hex(8)}"
    messages = prompt.first_messages(request, known)
    asked_from = 0
    done: list[_Round] = []
    for number in range(1, deps.settings.ai_draft_repair_rounds + 2):
        completion = await _ask(
            deps,
            client,
            options,
            organisation_id,
            workspace_id,
            messages,
            key=f"{attempt}:{number}",
            first=number == 1,
        )
        if completion is None:
            break  # the quota ran out after the first round: keep what we have
        try:
            definition, findings = rounds.parse_answer(completion.text)
        except rounds.NotJson as exc:
            raise AiDraftFailed(
                f"The AI provider's answer was not a funnel definition: {exc}. Nothing was saved."
            ) from None
        if definition is not None:
            definition = rounds.impose(definition, request)
            async with deps.db.read() as session:
                findings = await _findings(session, workspace_id, definition, request)
        done.append(_Round(number, messages[asked_from:], completion, definition, findings))
        if not findings:
            break
        # The model's answer was already recorded with its round: the next one asks anew
        # from the repair request on.
        asked_from = len(messages) + 1
        messages = [
            *messages,
            *prompt.repair_messages(completion.text, [rounds.finding_line(p) for p in findings]),
        ]
    return done


async def _findings(
    session: ReadSession, workspace_id: int, definition: Definition, request: prompt.DraftRequest
) -> list[Problem]:
    """The validator's findings (the same check publishing makes) plus the channel constraint."""
    found = await definitions.check(session, workspace_id, definition)
    return [*found, *rounds.channel_findings(definition, request)]


async def _ask(
    deps: DraftingDeps,
    client: ChatClient,
    options: AiOptions,
    organisation_id: int,
    workspace_id: int,
    messages: list[ChatMessage],
    *,
    key: str,
    first: bool,
) -> Completion | None:
    """One metered call: reserve its upper bound, call, settle to what it cost. ``None`` when a
    repair round no longer fits the quota; the first round is refused instead."""
    max_tokens = deps.settings.ai_draft_max_tokens
    estimate = estimate_tokens(messages, max_tokens)
    now = deps.clock.now
    async with deps.db.write() as uow:
        decision = await ai_ledger.reserve(uow.session, organisation_id, estimate, now())
    if not decision.allowed:
        if not first:
            return None
        left = decision.remaining_tokens or 0
        raise AiQuotaSpent(
            f"The AI quota is spent: {left} token(s) left this month, about {estimate} needed to "
            "draft a funnel. Nothing was drafted; an owner can raise the quota, or it renews on "
            "the first of the month."
        )
    try:
        completion = await client.complete(
            messages,
            model=options.model,
            max_tokens=max_tokens,
            temperature=options.temperature,
            response_format=response_format(),
        )
    except OutboundError as exc:
        billed = may_have_been_billed(exc)
        async with deps.db.write() as uow:
            await ai_ledger.settle(
                uow.session, organisation_id, estimate, estimate if billed else 0, now()
            )
            if billed:
                await ai_ledger.log_usage(
                    uow.session,
                    organisation_id=organisation_id,
                    workspace_id=workspace_id,
                    key=key,
                    outcome="lost",
                    tokens=estimate,
                    model=options.model,
                    detail=f"funnel draft: reply lost, counted at its reservation: {exc}",
                    now=now(),
                )
        raise AiDraftFailed(
            f"The AI provider did not answer usably: {exc}. Nothing was saved."
        ) from None
    tokens = completion.usage.total_tokens
    async with deps.db.write() as uow:
        await ai_ledger.settle(uow.session, organisation_id, estimate, tokens, now())
        await ai_ledger.log_usage(
            uow.session,
            organisation_id=organisation_id,
            workspace_id=workspace_id,
            key=key,
            outcome="generated",
            tokens=tokens,
            model=completion.model,
            detail=f"funnel draft ({completion.finish_reason or 'no finish reason'})",
            now=now(),
        )
    return completion


def _name(request: prompt.DraftRequest) -> str:
    if request.name.strip():
        return request.name.strip()
    words = request.description.split()
    short = " ".join(words[:6])
    return (short[:80] + ("…" if len(words) > 6 or len(short) > 80 else "")) or "Drafted funnel"


async def _store(
    deps: DraftingDeps,
    workspace_id: int,
    request: prompt.DraftRequest,
    *,
    user_id: int | None,
    done: list[_Round],
    last: _Round,
    endpoint: str,
) -> AiDraft:
    assert last.definition is not None
    now = deps.clock.now()
    outcome = "invalid" if last.findings else ("valid" if len(done) == 1 else "repaired")
    async with deps.db.write() as uow:
        funnel = await definitions.create_funnel(
            uow.session, workspace_id, _name(request), last.definition, now
        )
        simulation = await simulate_samples(uow, workspace_id, funnel.id, start=now)
        record = AiDraft(
            workspace_id=workspace_id,
            funnel_id=funnel.id,
            created_by=user_id,
            description=request.description,
            constraints=prompt.constraints(request),
            # The model the provider says answered (it may name a dated snapshot).
            model=last.completion.model[:100],
            endpoint=endpoint[:500],
            prompt_tokens=sum(r.completion.usage.prompt_tokens for r in done),
            completion_tokens=sum(r.completion.usage.completion_tokens for r in done),
            total_tokens=sum(r.completion.usage.total_tokens for r in done),
            rounds=[
                {
                    "round": r.number,
                    "asked": [{"role": m.role, "content": m.content} for m in r.asked],
                    "answer": r.completion.text,
                    "tokens": r.completion.usage.total_tokens,
                    "decoded": r.definition is not None,
                    "findings": [rounds.finding_dict(p) for p in r.findings],
                }
                for r in done
            ],
            outcome=outcome,
            findings=[rounds.finding_dict(p) for p in last.findings],
            simulation=simulation,
            created_at=now,
        )
        uow.session.add(record)
        await uow.session.flush()
        await audit.record(
            uow.session,
            action="funnel.ai_drafted",
            object_type="funnel",
            object_id=funnel.id,
            workspace_id=workspace_id,
            after={
                "name": funnel.name,
                "model": record.model,
                "rounds": len(done),
                "outcome": outcome,
                "tokens": record.total_tokens,
            },
            now=now,
        )
    return record


async def record_of(session: ReadSession, workspace_id: int, funnel_id: int) -> AiDraft | None:
    """The drafting record of a funnel (``None`` for a funnel drawn by hand)."""
    row: AiDraft | None = await session.scalar(
        scoped_select(AiDraft, workspace_id).where(AiDraft.funnel_id == funnel_id)
    )
    return row


async def get_record(session: ReadSession, workspace_id: int, funnel_id: int) -> AiDraft:
    row = await record_of(session, workspace_id, funnel_id)
    if row is None:
        raise FunnelNotFound(f"funnel {funnel_id} was not drafted with AI")
    return row


def record_view(row: AiDraft) -> dict[str, Any]:
    return {
        "funnel_id": row.funnel_id,
        "description": row.description,
        "constraints": row.constraints,
        "model": row.model,
        "endpoint": row.endpoint,
        "prompt_tokens": row.prompt_tokens,
        "completion_tokens": row.completion_tokens,
        "total_tokens": row.total_tokens,
        "rounds": row.rounds,
        "outcome": row.outcome,
        "findings": row.findings,
        "simulation": row.simulation,
        "created_at": row.created_at.isoformat(),
    }
