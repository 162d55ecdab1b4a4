"""Actions of this release: send_email and notify_team (through the outbox), the contact changes
(tags, lists, fields) and the moves between funnels.

Sends never talk to SMTP here: they emit an outbox effect that commits with the run's advancement
and is delivered after commit (FN-7). Quiet hours are applied at this message layer: an effect's
``not_before`` is the next moment outside the run's (or the funnel's) quiet hours in the contact's
time zone (FN-20).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm.attributes import set_committed_value

from app.db.tenancy import scoped_select, scoped_update
from app.engines.funnels.contacts.fields import check_field_value
from app.engines.funnels.contacts.memberships import (
    add_tag,
    add_to_list,
    remove_from_list,
    remove_tag,
)
from app.engines.funnels.contacts.segments import STANDARD_FIELDS
from app.engines.funnels.definitions.graph import (
    AddTag,
    AddToList,
    EnterFunnel,
    ExitFunnel,
    NotifyTeam,
    RemoveFromList,
    RemoveTag,
    SendEmail,
    SetField,
)
from app.engines.funnels.models import Contact, Funnel, FunnelVersion, Run
from app.engines.funnels.outbox.due.cancel import cancel_pending_effects
from app.engines.funnels.outbox.payloads import Email
from app.engines.funnels.outbox.work.render import render, variables
from app.engines.funnels.runs.due.entry import enter
from app.engines.funnels.runs.due.times import quiet_release
from app.engines.funnels.runs.states import RUN_ACTIVE, RUN_EXITED, RUNS
from app.engines.funnels.runs.work.effect_failures import cannot_go_out
from app.engines.funnels.runs.work.nodes.base import (
    Effect,
    End,
    Executor,
    Next,
    NodeContext,
    Outcome,
)
from app.engines.funnels.sendtime import plan as send_time
from app.scheduling.zones import zone_or_utc


def quiet_hours(ctx: NodeContext) -> tuple[int, int] | None:
    """The quiet hours in force for the run's messages (its own, or the funnel's)."""
    quiet = ctx.run.context.get("quiet")
    if isinstance(quiet, list) and len(quiet) == 2:
        return int(quiet[0]), int(quiet[1])
    return ctx.funnel_quiet


def not_before(ctx: NodeContext, start: datetime | None = None) -> tuple[str, datetime]:
    """When a message may go out: ``start`` (default now; later for a best-hour send), or the
    end of the quiet hours in force then (the deliverer's consent gate checks them again at
    send time)."""
    at = start or ctx.now
    hours = quiet_hours(ctx)
    if hours is None:
        return at.isoformat(), at
    release = quiet_release(at, zone_or_utc(ctx.contact.timezone), int(hours[0]), int(hours[1]))
    return release.isoformat(), release


def message_id(ctx: NodeContext, key: str) -> str:
    """Stable per effect: a redelivery carries the same Message-ID."""
    return f"<{key}.w{ctx.run.workspace_id}@{ctx.mail_domain}>"


async def run_send_email(ctx: NodeContext, node: SendEmail) -> Outcome:
    contact = ctx.contact
    if not contact.email:
        return cannot_go_out(node, "email", "the contact has no e-mail address")
    values = variables(contact, ctx.run.context)
    key = ctx.effect_key()
    planned = await send_time.plan(ctx, node.best_hour)
    _, release = not_before(ctx, planned.at if planned else None)
    settings = ctx.graph.definition.settings
    payload = Email(
        to=[contact.email],
        subject=render(node.subject, values),
        text=render(node.body, values),
        html=render(node.html, values) if node.html else None,
        message_id=message_id(ctx, key),
        topic=settings.topic,
        when_capped=settings.when_capped,
        transactional=settings.transactional or node.transactional,
        quiet_hours=quiet_hours(ctx),
    )
    ctx.emit(Effect(payload=payload, not_before=release))
    output: dict[str, Any] = {
        "effect": key,
        "message_id": payload.message_id,
        "subject": payload.subject,
    }
    if planned is not None:
        output["send_time"] = planned.record
    return Next(node.next, send_time.decision(ctx.now, release, planned), output)


async def run_notify_team(ctx: NodeContext, node: NotifyTeam) -> Outcome:
    values = variables(ctx.contact, ctx.run.context)
    key = ctx.effect_key()
    payload = Email(
        to=list(node.to),
        subject=render(node.subject, values),
        text=render(node.body, values),
        message_id=message_id(ctx, key),
        # Team notifications are about the contact, not to them: their consent does not apply.
        internal=True,
    )
    ctx.emit(Effect(payload=payload, not_before=ctx.now))
    return Next(node.next, f"notified {', '.join(node.to)}", {"effect": key})


async def run_add_tag(ctx: NodeContext, node: AddTag) -> Outcome:
    await ctx.writing()
    added = await add_tag(ctx.session, ctx.contact, node.tag, ctx.now)
    ctx.invalidate_facts()
    return Next(node.next, f"tag '{node.tag}' " + ("added" if added else "already present"))


async def run_remove_tag(ctx: NodeContext, node: RemoveTag) -> Outcome:
    await ctx.writing()
    removed = await remove_tag(ctx.session, ctx.contact, node.tag)
    ctx.invalidate_facts()
    return Next(node.next, f"tag '{node.tag}' " + ("removed" if removed else "was not present"))


async def run_add_to_list(ctx: NodeContext, node: AddToList) -> Outcome:
    await ctx.writing()
    added = await add_to_list(ctx.session, ctx.contact, node.list, ctx.now)
    ctx.invalidate_facts()
    return Next(node.next, f"list '{node.list}' " + ("joined" if added else "already a member"))


async def run_remove_from_list(ctx: NodeContext, node: RemoveFromList) -> Outcome:
    await ctx.writing()
    removed = await remove_from_list(ctx.session, ctx.contact, node.list)
    ctx.invalidate_facts()
    return Next(node.next, f"list '{node.list}' " + ("left" if removed else "was not a member"))


async def run_set_field(ctx: NodeContext, node: SetField) -> Outcome:
    await ctx.writing()
    contact = ctx.contact
    before: object
    values: dict[str, object] = {"updated_at": ctx.now}
    if node.field in STANDARD_FIELDS:
        before = getattr(contact, node.field)
        values[node.field] = node.value
    else:
        kind = ctx.custom_fields.get(node.field, "text")
        value = check_field_value(node.field, kind, node.value)
        before = (contact.fields or {}).get(node.field)
        values["fields"] = {**(contact.fields or {}), node.field: value}
    # An UPDATE statement without session synchronisation, and the loaded object told the new
    # values as already stored: an ORM flush (or a synchronised UPDATE) here would walk every
    # object of the batch's session for each run.
    await ctx.session.execute(
        scoped_update(Contact, ctx.run.workspace_id)
        .execution_options(synchronize_session=False)
        .where(Contact.id == contact.id)
        .values(values)
    )
    for name, value in values.items():
        set_committed_value(contact, name, value)
    ctx.invalidate_facts()
    return Next(
        node.next,
        f"{node.field} = {node.value!r}",
        {"field": node.field, "before": before, "after": node.value},
    )


async def run_enter_funnel(ctx: NodeContext, node: EnterFunnel) -> Outcome:
    await ctx.writing()
    row = (
        await ctx.session.execute(
            scoped_select(Funnel, ctx.run.workspace_id, Funnel, FunnelVersion)
            .join(FunnelVersion, FunnelVersion.id == Funnel.current_version_id)
            .where(Funnel.id == node.funnel_id)
        )
    ).first()
    if row is None:
        return Next(node.next, f"funnel {node.funnel_id} is not published: not entered")
    run_id = await enter(ctx.session, version=row[1], contact_id=ctx.contact.id, now=ctx.now)
    if run_id is None:
        return Next(node.next, f"already in funnel {node.funnel_id}")
    return Next(node.next, f"entered funnel {node.funnel_id}", {"run_id": run_id})


async def run_exit_funnel(ctx: NodeContext, node: ExitFunnel) -> Outcome:
    await ctx.writing()
    if node.funnel_id is None or node.funnel_id == ctx.run.funnel_id:
        return End(RUN_EXITED, "exit_funnel", "left the funnel")
    other = await ctx.session.scalar(
        RUNS.transition(
            scoped_update(Run, ctx.run.workspace_id)
            .execution_options(synchronize_session=False)
            .where(Run.funnel_id == node.funnel_id, Run.contact_id == ctx.contact.id),
            RUN_EXITED,
            from_=(RUN_ACTIVE,),
        )
        .values(
            exit_reason=f"exit_funnel from funnel {ctx.run.funnel_id}",
            ended_at=ctx.now,
            updated_at=ctx.now,
            wake_at=None,
            lease_owner=None,
            lease_until=None,
        )
        .returning(Run.id)
    )
    if other is None:
        return Next(node.next, f"not in funnel {node.funnel_id}")
    await cancel_pending_effects(ctx.session, ctx.now, reason="exit_funnel", run_id=other)
    return Next(node.next, f"ended run {other} of funnel {node.funnel_id}")


EXECUTORS: dict[str, Executor] = {
    "send_email": run_send_email,
    "notify_team": run_notify_team,
    "add_tag": run_add_tag,
    "remove_tag": run_remove_tag,
    "add_to_list": run_add_to_list,
    "remove_from_list": run_remove_from_list,
    "set_field": run_set_field,
    "enter_funnel": run_enter_funnel,
    "exit_funnel": run_exit_funnel,
}
