"""Funnels dashboard pages under ``/ui/funnels``: the funnels list, a funnel's draft edited as JSON
with the validator's problems shown per node, publishing, the report of the latest version (chart and table), a test send of a message
node, versions, runs with their steps, a
contact's timeline.

Pages call the same services as the API. A draft that does not parse is shown again with the
message; nothing is lost.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, get, post
from litestar.params import FromPath, FromQuery, URLEncodedBody
from litestar.response import Redirect, Template

from app.clock import Clock
from app.db.session import ReadSession, UnitOfWork
from app.engines.funnels import reads
from app.engines.funnels.consent import gate
from app.engines.funnels.definitions import service, trial_send
from app.engines.funnels.definitions.graph import Definition
from app.engines.funnels.deps import FunnelsDeps
from app.engines.funnels.drafting.service import record_of
from app.engines.funnels.models import FunnelVersion
from app.engines.funnels.runs.records import reports
from app.errors import DomainError, ValidationFailed
from app.integrations.mail import MailError
from app.platform.service import Principal
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard import (
    audiences,
    contacts_ui,
    funnel_diff,
    funnel_editor,
    funnel_editor_names,
    funnel_experiments_ui,
)
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, CurrentSettings, Reads, Writes

PREFIX = "/ui/funnels"


class DraftForm(msgspec.Struct, kw_only=True):
    """The editor's fields as posted (unknown fields, e.g. the CSRF token, are ignored)."""

    name: str = ""
    definition: str = ""


class NewFunnelForm(msgspec.Struct, kw_only=True):
    name: str = ""


EMPTY_DEFINITION = {"triggers": [{"kind": "manual"}], "nodes": []}


@get(PREFIX)
async def funnels_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    funnels = await service.list_funnels(session, principal.workspace_id)
    counts = await service.run_counts(session, [f.id for f in funnels])
    numbers = await reads.version_numbers(session, principal.workspace_id)
    rows = [
        {
            "funnel": f,
            "version": numbers.get(f.current_version_id) if f.current_version_id else None,
            "counts": counts[f.id],
        }
        for f in funnels
    ]
    return page(request, "funnels/list.html", principal, rows=rows, errors=[])


@post(PREFIX)
async def create_funnel_page(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    data: URLEncodedBody[NewFunnelForm],
) -> Redirect:
    funnel = await service.create_funnel(
        uow.session,
        principal.workspace_id,
        data.name or "Untitled funnel",
        service.parse_definition(EMPTY_DEFINITION),
        clock.now(),
    )
    return Redirect(f"{PREFIX}/{funnel.id}")


async def _editor(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    funnel_id: int,
    *,
    text: str | None = None,
    error: str | None = None,
    notice: str | None = None,
    problems: list[dict[str, Any]] | None = None,
) -> Template:
    funnel = await service.get_funnel(session, principal.workspace_id, funnel_id)
    versions = await service.versions(session, principal.workspace_id, funnel_id)
    runs = await service.list_runs(session, principal.workspace_id, funnel_id, after=None, limit=50)
    emails = await reads.contact_emails(
        session, principal.workspace_id, (r.contact_id for r in runs)
    )
    report = await reports.funnel_report(session, funnel_id)
    daily = await funnel_experiments_ui.daily_chart(request, session, funnel_id)
    if problems is None and error is None:
        problems = await funnel_editor.check_raw(session, principal.workspace_id, funnel.draft)
    else:
        problems = funnel_editor.plain_problems(funnel.draft, problems or [])
    data = await funnel_editor.editor_data(
        session, principal.workspace_id, funnel_id, problems, report
    )
    by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in problems or []:
        by_node[p["node_id"] or "(graph)"].append(p)
    nodes = [n for n in funnel.draft.get("nodes", []) if isinstance(n, dict)]
    node_ids = [n.get("id") for n in nodes]
    email_nodes = [str(n.get("id")) for n in nodes if n.get("kind") == "send_email"]
    return page(
        request,
        "funnels/edit.html",
        principal,
        funnel=funnel,
        text=text if text is not None else json.dumps(funnel.draft, indent=2, ensure_ascii=False),
        error=error,
        notice=notice,
        problems=problems or [],
        by_node=dict(by_node),
        node_ids=node_ids,
        email_nodes=email_nodes,
        report=report,
        latest=report.versions[-1] if report.versions else None,
        chart=_chart(report),
        daily_chart=daily,
        versions=versions,
        runs=runs,
        emails=emails,
        editor=data,
        ai_draft=await record_of(session, principal.workspace_id, funnel_id),
    )


def _chart(report: reports.FunnelReport) -> dict[str, Any] | None:
    """The chart of the latest version's report: per node, in graph order, the people who
    entered it, wait on it and ended there early, and for message nodes the messages sent and
    opened (drawn by ``static/funnel_report.js``)."""
    if not report.versions:
        return None
    latest = report.versions[-1]

    def sent(n: reports.NodeReport, name: str) -> int | None:
        if n.messages is None:
            # A message node nobody reached yet has sent nothing; other nodes send nothing.
            return 0 if n.kind.startswith("send_") else None
        return int(getattr(n.messages, name))

    nodes = latest.nodes
    return {
        "title": f"Version {latest.version}: people and messages per node",
        "y_label": "count",
        "labels": [n.node_id for n in nodes],
        "series": [
            {"label": "entered", "values": [n.entered for n in nodes]},
            {"label": "waiting", "values": [n.waiting for n in nodes]},
            {"label": "ended early", "values": [n.exited for n in nodes]},
            {"label": "sent", "values": [sent(n, "sent") for n in nodes]},
            {"label": "opened", "values": [sent(n, "opened") for n in nodes]},
        ],
    }


@get(f"{PREFIX}/{{funnel_id:int}}")
async def edit_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    funnel_id: FromPath[int],
    notice: FromQuery[str | None] = None,
) -> Template:
    return await _editor(request, principal, session, funnel_id, notice=notice)


def _parse_draft(data: DraftForm) -> tuple[Definition | None, str | None]:
    """The posted definition, or the message saying why it is not one: the step and setting a
    decoding error concerns, by their names on the form (never the decoder's path)."""
    try:
        raw = json.loads(data.definition)
    except json.JSONDecodeError as exc:
        return None, f"The draft is not valid JSON (line {exc.lineno}, column {exc.colno})"
    try:
        return service.parse_definition(raw), None
    except DomainError as exc:
        detail = exc.details[0] if exc.details and isinstance(exc.details[0], dict) else {}
        reason = str(detail.get("message") or exc.message)
        return None, str(funnel_editor.decode_problem(raw, reason)["message"])


async def _store_draft(
    uow: UnitOfWork,
    clock: Clock,
    principal: Principal,
    funnel_id: int,
    data: DraftForm,
    definition: Definition,
) -> None:
    await service.update_funnel(
        uow.session,
        principal.workspace_id,
        funnel_id,
        now=clock.now(),
        name=data.name or None,
        definition=definition,
    )


@post(f"{PREFIX}/{{funnel_id:int}}")
async def save_draft(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    funnel_id: FromPath[int],
    data: URLEncodedBody[DraftForm],
) -> Template | Redirect:
    """Save the draft. JSON that does not parse, or does not decode as a definition, is shown
    again with the message; the stored draft is left as it was."""
    definition, message = _parse_draft(data)
    if message is not None:
        return await _editor(
            request, principal, uow.session, funnel_id, text=data.definition, error=message
        )
    assert definition is not None  # no message: it parsed
    await _store_draft(uow, clock, principal, funnel_id, data, definition)
    return Redirect(f"{PREFIX}/{funnel_id}?notice={quote('Draft saved')}")


@post(f"{PREFIX}/{{funnel_id:int}}/publish")
async def publish_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    funnel_id: FromPath[int],
    data: URLEncodedBody[DraftForm],
) -> Template | Redirect:
    """Save what the editor holds, then publish it: an edit made since the last save is never
    left behind. A draft that does not parse is shown again and nothing is published; a draft
    the validator refuses is kept as saved (only the publication is taken back), with its
    problems."""
    if data.definition.strip():
        definition, message = _parse_draft(data)
        if message is not None:
            return await _editor(
                request,
                principal,
                uow.session,
                funnel_id,
                text=data.definition,
                error=f"Not published: {message}",
            )
        assert definition is not None
        await _store_draft(uow, clock, principal, funnel_id, data, definition)
    try:
        async with uow.attempt():
            version = await service.publish(
                uow.session,
                principal.workspace_id,
                funnel_id,
                user_id=principal.user_id,
                now=clock.now(),
            )
    except DomainError as exc:
        if exc.code != "invalid_graph":
            raise
        return await _editor(
            request,
            principal,
            uow.session,
            funnel_id,
            error="Not published: fix the problems below first. The draft is saved.",
            problems=list(exc.details),
        )
    return Redirect(f"{PREFIX}/{funnel_id}?notice={quote(f'Published version {version.number}')}")


class TestSendForm(msgspec.Struct, kw_only=True):
    node_id: str = ""
    to: str = ""
    contact_id: str = ""
    """Whose variables fill the creative (empty: none)."""
    source: str = "draft"
    """``draft`` or ``published``."""


@post(f"{PREFIX}/{{funnel_id:int}}/test-send")
async def test_send_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    settings: CurrentSettings,
    funnel_id: FromPath[int],
    data: URLEncodedBody[TestSendForm],
) -> Template | Redirect:
    """Send one message node to an address with a contact's variables, marked as a test and
    counted nowhere (the API's ``POST /api/v1/funnels/{id}/test-send``, from the editor).
    ``session`` serves the editor shown again after a refusal."""
    try:
        contact_id = int(data.contact_id) if data.contact_id.strip() else None
    except ValueError:
        contact_id = -1
    try:
        if contact_id == -1:
            raise ValidationFailed.field("contact_id", "a contact id (a number)")
        # Its own read, closed before the mail server is called: no connection waits on it.
        async with runtime.db.read() as reading:
            email = await trial_send.prepare(
                reading,
                principal.workspace_id,
                funnel_id,
                node_id=data.node_id,
                to=data.to.strip(),
                contact_id=contact_id,
                draft=data.source != "published",
                base_url=settings.web.public_url,
                domain=settings.mail.from_address.rpartition("@")[2] or "localhost",
                address_key=gate.address_key(runtime.secrets),
                now=runtime.clock.now(),
            )
        await runtime.resources.require(FunnelsDeps).trial_mail.send(email)
    except DomainError as exc:
        if exc.status >= 500 or (exc.status == 404 and "funnel" in exc.code):
            raise
        return await _editor(
            request, principal, session, funnel_id, error=f"Test not sent: {exc.message}"
        )
    except MailError as exc:
        return await _editor(request, principal, session, funnel_id, error=f"Test not sent: {exc}")
    said = f"Test sent to {data.to.strip()}: {email.subject} ({email.message_id})"
    return Redirect(f"{PREFIX}/{funnel_id}?notice={quote(said)}")


@get(f"{PREFIX}/{{funnel_id:int}}/partials/runs")
async def runs_partial(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    funnel_id: FromPath[int],
) -> Template:
    """The editor's runs table, refreshed in place while a run is active."""
    funnel = await service.get_funnel(session, principal.workspace_id, funnel_id)
    runs = await service.list_runs(session, principal.workspace_id, funnel_id, after=None, limit=50)
    emails = await reads.contact_emails(
        session, principal.workspace_id, (r.contact_id for r in runs)
    )
    return page(request, "funnels/_runs.html", principal, funnel=funnel, runs=runs, emails=emails)


@get(f"{PREFIX}/{{funnel_id:int}}/versions/{{number:int}}")
async def version_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    funnel_id: FromPath[int],
    number: FromPath[int],
) -> Template:
    funnel = await service.get_funnel(session, principal.workspace_id, funnel_id)
    version = await service.get_version(session, principal.workspace_id, funnel_id, number)
    return page(
        request,
        "funnels/version.html",
        principal,
        funnel=funnel,
        version=version,
        text=json.dumps(version.definition, indent=2, ensure_ascii=False),
    )


@get(f"{PREFIX}/runs/{{run_id:int}}")
async def run_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    run_id: FromPath[int],
) -> Template:
    run = await service.get_run(session, principal.workspace_id, run_id)
    funnel = await service.get_funnel(session, principal.workspace_id, run.funnel_id)
    steps = await service.steps_of(session, run.id)
    effects = await service.effects_of_run(session, run.id)
    version = await session.get(FunnelVersion, run.version_id)
    return page(
        request,
        "funnels/run.html",
        principal,
        run=run,
        funnel=funnel,
        steps=steps,
        effects=effects,
        version=version,
    )


@get(f"{PREFIX}/contacts")
async def contacts_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    q: FromQuery[str | None] = None,
) -> Template:
    return await contacts_ui.contacts_listing(request, principal, session, q=q)


@get(f"{PREFIX}/contacts/{{contact_id:int}}")
async def timeline_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    contact_id: FromPath[int],
) -> Template:
    return await contacts_ui.contact_detail(request, principal, session, contact_id)


NAV: list[tuple[str, str]] = [(PREFIX, "Funnels")]
"""(href, label) links this engine adds to the navigation bar."""

ROUTES: list[Any] = [
    funnels_page,
    create_funnel_page,
    edit_page,
    save_draft,
    publish_page,
    test_send_page,
    version_page,
    runs_partial,
    run_page,
    contacts_page,
    timeline_page,
    *funnel_editor.ROUTES,
    *funnel_editor_names.ROUTES,
    *audiences.ROUTES,
    *funnel_diff.ROUTES,
]
"""Page handlers; they receive ``principal`` (signed-in person) and the request's dependencies
(:mod:`app.web.deps`)."""

PUBLIC_ROUTES: list[Any] = []
"""Handlers reachable without signing in (hosted forms, tracking, snippets)."""
