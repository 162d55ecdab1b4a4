"""Node executors of the actions that reach outside (FN-7: none of them calls out itself).

**Sends** — ``send_sms``, ``send_push``, ``send_letter`` and ``notify_team`` — write their effect
to the outbox and move on, like ``send_email``; quiet hours hold the message (FN-20).

**Requests whose answer the run needs** — ``http_request``, ``create_payment``, ``book_slot`` and
``ai_generate`` — write their effect and sleep on their own node. The deliverer records the
answer and wakes the run; the node then runs again, stores the answer in the run's context and
continues:

- ``http_request`` → ``context["http"][node id]`` (status, final URL, headers, body, parsed JSON);
- ``create_payment`` → ``context["payments"][node id]`` (payment id, checkout URL, status);
- ``book_slot`` → ``context["bookings"][node id]`` (booking id, start, end);
- ``ai_generate`` → ``context["vars"][variable]``, the merge variable later messages use.

**Failure**: an effect that failed for good (a refused target, a declined request, an exhausted AI
quota, retries used up, a contact without the phone, token or address its channel needs) takes the
node's ``on_failure`` branch, or ends the run as ``failed``, with the error on the step and on the
delivery events (:mod:`app.engines.funnels.runs.work.effect_failures`). Continuing would send later messages built on an answer that never came
("Hello ," to everyone whose generation was refused); the steps say exactly where and why it
stopped. A cache hit of ``ai_generate`` needs no effect at all: the text is filled in at once, no
provider call is made and no quota is used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import msgspec

from app.db.tenancy import scoped_select
from app.engines.funnels.contacts.channel_fields import PUSH_TOKEN_FIELD, missing_for
from app.engines.funnels.definitions.graph import (
    AiGenerate,
    BookSlot,
    CreatePayment,
    HttpRequest,
    Node,
    NotifyTeam,
    SendLetter,
    SendPush,
    SendSms,
    kind_of,
)
from app.engines.funnels.definitions.validate import merge_variables
from app.engines.funnels.models import (
    OUTBOX_CANCELLED,
    OUTBOX_FAILED,
    OUTBOX_SKIPPED,
    RUN_FAILED,
)
from app.engines.funnels.outbox.payloads import (
    Ai,
    Booking,
    Http,
    Letter,
    Payment,
    Push,
    Requested,
    Sms,
    Team,
)
from app.engines.funnels.outbox.work.render import render, variables
from app.engines.funnels.outside import ai_ledger
from app.engines.funnels.outside.config import AiOptions, push_token_field
from app.engines.funnels.outside.models import ProviderConfig
from app.engines.funnels.outside.results import effect_state
from app.engines.funnels.runs.work.effect_failures import cannot_go_out
from app.engines.funnels.runs.work.nodes.actions import message_id, not_before, quiet_hours
from app.engines.funnels.runs.work.nodes.base import (
    Effect,
    End,
    Executor,
    Next,
    NodeContext,
    NodeFailed,
    Outcome,
    Sleep,
)
from app.engines.funnels.sendtime import plan as send_time
from app.integrations.ai import Creative, cache_key

POLL = timedelta(minutes=10)
"""A run waiting on its effect looks again after this long even if nobody woke it (the deliverer
gave up on a transient failure, or the wake-up met the run while it was leased)."""


async def _held(
    ctx: NodeContext, node: SendSms | SendPush | SendLetter, payload: Sms | Push | Letter
) -> tuple[str, str, dict[str, Any]]:
    """Emit a message effect, at the contact's best hour if the step asks for it and held for
    quiet hours; its key, the step's decision and what the step records about its send time."""
    planned = await send_time.plan(ctx, node.best_hour)
    _, release = not_before(ctx, planned.at if planned else None)
    settings = ctx.graph.definition.settings
    # The frequency cap at send time: transactional messages are not counted; the others wait
    # or are skipped as the funnel says.
    payload = msgspec.structs.replace(
        payload,
        when_capped=settings.when_capped,
        transactional=settings.transactional or node.transactional,
        quiet_hours=quiet_hours(ctx),
    )
    key = ctx.emit(Effect(payload=payload, not_before=release))
    recorded = {"send_time": planned.record} if planned is not None else {}
    return key, send_time.decision(ctx.now, release, planned), recorded


def _lacking(
    ctx: NodeContext, node: Node, channel: str, token_field: str = PUSH_TOKEN_FIELD
) -> Outcome | None:
    """The failure of a message to a contact who lacks what its channel needs, if they do."""
    contact = ctx.contact
    missing = missing_for(
        kind_of(node),
        email=contact.email,
        phone=contact.phone,
        fields=contact.fields,
        push_token_field=token_field,
    )
    if not missing:
        return None
    what = {
        "sms": "no phone number",
        "push": f"no device token in '{token_field}'",
        "letter": "no complete postal address",
    }[channel]
    error = f"the contact has {what} ({', '.join(missing)} empty)"
    return cannot_go_out(node, channel, error, {"missing": missing})


async def run_send_sms(ctx: NodeContext, node: SendSms) -> Outcome:
    if (failed := _lacking(ctx, node, "sms")) is not None:
        return failed
    text = render(node.text, variables(ctx.contact, ctx.run.context))
    # The phone is set: _lacking refused a contact without one.
    key, decision, recorded = await _held(ctx, node, Sms(to=ctx.contact.phone or "", text=text))
    return Next(node.next, decision, {"effect": key, "text": text, **recorded})


async def run_send_push(ctx: NodeContext, node: SendPush) -> Outcome:
    token_field = await push_token_field(ctx.session, ctx.run.workspace_id)
    if (failed := _lacking(ctx, node, "push", token_field)) is not None:
        return failed
    values = variables(ctx.contact, ctx.run.context)
    title, body = render(node.title, values), render(node.body, values)
    key, decision, recorded = await _held(ctx, node, Push(title=title, body=body))
    return Next(node.next, decision, {"effect": key, "title": title, "body": body, **recorded})


async def run_send_letter(ctx: NodeContext, node: SendLetter) -> Outcome:
    if (failed := _lacking(ctx, node, "letter")) is not None:
        return failed
    values = variables(ctx.contact, ctx.run.context)
    content = render(node.body or node.template, values)
    key, decision, recorded = await _held(ctx, node, Letter(content=content))
    return Next(node.next, decision, {"effect": key, **recorded})


async def run_notify_team(ctx: NodeContext, node: NotifyTeam) -> Outcome:
    """E-mail members of the workspace: ``to`` holds ``@all``, ``@admins`` or members' e-mail
    addresses, resolved against the members when the message is sent."""
    values = variables(ctx.contact, ctx.run.context)
    key = ctx.effect_key()
    payload = Team(
        to=list(node.to),
        subject=render(node.subject, values),
        text=render(node.body, values),
        message_id=message_id(ctx, key),
        # About the contact, not to them: their consent and suppression do not apply.
        internal=True,
    )
    ctx.emit(Effect(payload=payload, not_before=ctx.now))
    return Next(node.next, f"notifying {', '.join(node.to)}", {"effect": key})


# -- requests whose answer the run waits for ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """What a delivered request brought back."""

    effect: str
    result: dict[str, Any]


RequestOf = Callable[[int, str], Requested]
"""Builds a node's request payload from its run id and node id (called on the first pass only)."""


HeldBack = Callable[[str, str], Outcome]
"""What a run does when the consent gate held its request back (the effect's key, the reason)."""


async def _request(
    ctx: NodeContext,
    node: Node,
    channel: str,
    request: RequestOf,
    *,
    held_back: HeldBack | None = None,
) -> Answer | Outcome:
    """Emit the node's effect on its first pass; on later passes, the answer (a dict) once it
    is recorded, the end of the run if the effect failed, or another sleep."""
    pending = ctx.run.context.get("outside")
    if not (isinstance(pending, dict) and pending.get("node") == node.id):
        key = ctx.emit(Effect(payload=request(ctx.run.id, node.id), not_before=ctx.now))
        ctx.run.context["outside"] = {"node": node.id, "effect": key}
        return Sleep(ctx.now + POLL, f"{channel} requested", {"effect": key})
    key = str(pending["effect"])
    state = await effect_state(ctx.session, key)
    if state is not None and state.outcome is None and state.status not in _GONE:
        return Sleep(ctx.now + POLL, record=False)
    ctx.run.context.pop("outside", None)
    if state is not None and state.outcome is not None and state.outcome.ok:
        return Answer(key, state.outcome.result)
    if held_back is not None and state is not None and state.status == OUTBOX_SKIPPED:
        # A request that messages the contact, held back by the consent gate (FN-31).
        return held_back(key, state.last_error or "held back by the contact's choices")
    if state is None:
        error, code = "the effect disappeared before it was delivered", "lost"
    elif state.outcome is not None:
        error = state.outcome.error or "failed"
        code = str(state.outcome.result.get("code") or "failed")
    else:
        error, code = state.last_error or f"effect {state.status}", state.status
    output = {"effect": key, "code": code}
    if code == "ai_quota_exhausted" and not getattr(node, "on_failure", None):
        return End(RUN_FAILED, code, error[:200], {**output, "error": error}, error[:2000])
    return cannot_go_out(node, channel, error, output)


_GONE = frozenset({OUTBOX_FAILED, OUTBOX_SKIPPED, OUTBOX_CANCELLED})


async def run_http_request(ctx: NodeContext, node: HttpRequest) -> Outcome:
    values = variables(ctx.contact, ctx.run.context)
    settings = ctx.graph.definition.settings
    to_person = node.to_contact is not None
    waited = await _request(
        ctx,
        node,
        "http",
        lambda run_id, node_id: Http(
            run_id=run_id,
            node_id=node_id,
            method=node.method,
            url=render(node.url, values),
            headers={name: render(value, values) for name, value in node.headers.items()},
            body=None if node.body is None else render(node.body, values),
            to_contact=node.to_contact,
            topic=settings.topic if to_person else None,
            transactional=to_person and (settings.transactional or node.transactional),
            quiet_hours=quiet_hours(ctx) if to_person else None,
        ),
        # Held back, the message is not sent and the run goes on, as after a send step.
        held_back=(lambda key, why: Next(node.next, f"not sent: {why}"[:200], {"effect": key}))
        if to_person
        else None,
    )
    if not isinstance(waited, Answer):
        return waited
    result = waited.result
    ctx.run.context.setdefault("http", {})[node.id] = result
    return Next(
        node.next, f"HTTP {result.get('status')}", {"effect": waited.effect, **_brief(result)}
    )


def _brief(result: dict[str, Any]) -> dict[str, Any]:
    """What the step shows of a response (the full one is in the run's context)."""
    return {"status": result.get("status"), "url": result.get("url"), "bytes": len(result["body"])}


async def run_create_payment(ctx: NodeContext, node: CreatePayment) -> Outcome:
    waited = await _request(
        ctx,
        node,
        "payment",
        lambda run_id, node_id: Payment(
            run_id=run_id,
            node_id=node_id,
            amount_minor=node.amount_minor,
            currency=node.currency.lower(),
            description=render(node.description, variables(ctx.contact, ctx.run.context)),
            email=ctx.contact.email,
        ),
    )
    if not isinstance(waited, Answer):
        return waited
    result = waited.result
    stored = {k: result.get(k) for k in ("payment_id", "url", "status", "client_secret")}
    ctx.run.context.setdefault("payments", {})[node.id] = stored
    return Next(
        node.next,
        f"payment {result.get('payment_id')} created",
        {"effect": waited.effect, "payment_id": result.get("payment_id"), "url": result.get("url")},
    )


async def run_book_slot(ctx: NodeContext, node: BookSlot) -> Outcome:
    window_start = ctx.now.isoformat()
    waited = await _request(
        ctx,
        node,
        "booking",
        lambda run_id, node_id: Booking(
            run_id=run_id, node_id=node_id, resource=node.resource, window_start=window_start
        ),
    )
    if not isinstance(waited, Answer):
        return waited
    result = waited.result
    ctx.run.context.setdefault("bookings", {})[node.id] = result
    return Next(
        node.next,
        f"booked {result.get('start')}",
        {
            "effect": waited.effect,
            "booking_id": result.get("booking_id"),
            "start": result.get("start"),
        },
    )


async def _ai_options(ctx: NodeContext) -> AiOptions:
    raw = await ctx.session.scalar(
        scoped_select(ProviderConfig, ctx.run.workspace_id, ProviderConfig.options).where(
            ProviderConfig.kind == "ai"
        )
    )
    options: AiOptions = msgspec.convert(raw or {}, type=AiOptions)
    return options


def _requested_already(run_id: int, node_id: str) -> Requested:
    """For a node whose request is out already: :func:`_request` waits, it never builds another."""
    raise NodeFailed(f"node {node_id} of run {run_id} has its request out already")


async def run_ai_generate(ctx: NodeContext, node: AiGenerate) -> Outcome:
    """Fill ``node.variable`` for this contact, from the cache when the same creative was already
    generated for the same values of the attributes the prompt uses."""
    pending = ctx.run.context.get("outside")
    if not (isinstance(pending, dict) and pending.get("node") == node.id):
        options = await _ai_options(ctx)
        creative = Creative(
            model=options.model,
            prompt=node.prompt,
            system=options.system,
            max_tokens=options.max_tokens,
            temperature=options.temperature,
        )
        values = variables(ctx.contact, ctx.run.context)
        used = {name: values.get(name) for name in merge_variables(node.prompt)}
        key = cache_key(creative, used)
        hit = await ai_ledger.cached_text(ctx.session, ctx.run.workspace_id, key)
        if hit is not None:
            ctx.run.context.setdefault("vars", {})[node.variable] = hit
            return Next(node.next, f"{{{{{node.variable}}}}} from cache", {"cached": True})
        prompt = render(node.prompt, values)

        def request(run_id: int, node_id: str) -> Requested:
            return Ai(
                run_id=run_id, node_id=node_id, creative=creative, prompt=prompt, cache_key=key
            )
    else:
        request = _requested_already
    waited = await _request(ctx, node, "ai", request)
    if not isinstance(waited, Answer):
        return waited
    result = waited.result
    ctx.run.context.setdefault("vars", {})[node.variable] = result["text"]
    return Next(
        node.next,
        f"{{{{{node.variable}}}}} generated",
        {
            "effect": waited.effect,
            "cached": bool(result.get("cached")),
            "tokens": result.get("tokens"),
        },
    )


EXECUTORS: dict[str, Executor] = {
    "send_sms": run_send_sms,
    "send_push": run_send_push,
    "send_letter": run_send_letter,
    "notify_team": run_notify_team,
    "http_request": run_http_request,
    "create_payment": run_create_payment,
    "book_slot": run_book_slot,
    "ai_generate": run_ai_generate,
}
