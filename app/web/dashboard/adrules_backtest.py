"""The backtest page of a rule: a form (range, ad account, time of each day's evaluation) and,
once run, the estimate — totals (spend the rule would have paused, budget it would have moved), a
timeline chart per object drawn like the rule log's (``static/charts.js``), and the table of
would-be actions. The page reads only; the form is a GET, nothing is written anywhere."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import msgspec
from litestar import Request, get
from litestar.params import FromPath, FromQuery
from litestar.response import Template

from app.engines.adrules import accounts as account_service
from app.engines.adrules import rule_views
from app.engines.adrules.backtest.schemas import BacktestIn, BacktestObject, BacktestResult
from app.engines.adrules.backtest.service import backtest_saved
from app.errors import DomainError
from app.web.api.adrules_runs import preview_deps
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard.adrules_charts import PALETTE
from app.web.dashboard.common import error_messages, page

CHARTED = len(PALETTE)
"""Objects charted: those the rule would have acted on most."""
LISTED = 500
"""Would-be actions listed on the page (the API answers up to its own limit)."""
LABELS = {
    "since": "From",
    "until": "To",
    "evaluate_at": "Evaluated at",
    "account_ids": "Ad account",
}


def _day_seconds(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())


def object_chart(obj: BacktestObject, colour: str) -> dict[str, Any]:
    """One object's days: its budget as the rule would have left it, the spend Meta reported,
    and the part of it spent while the rule would have had it paused."""
    x = [_day_seconds(d.day) for d in obj.days]
    return {
        "x": x,
        "series": [
            {
                "label": "budget (replayed)",
                "values": [float(d.budget) if d.budget is not None else None for d in obj.days],
                "color": colour,
                "span_gaps": True,
            },
            {
                "label": "spend reported",
                "values": [float(d.spend) for d in obj.days],
                "color": "#555555",
                "dash": [6, 4],
            },
            {
                "label": "spend while paused",
                "values": [float(d.paused_spend) for d in obj.days],
                "color": "#b42318",
            },
        ],
        "y_label": "money",
    }


def charts(result: BacktestResult) -> list[dict[str, Any]]:
    """The objects the rule would have acted on most, each with its chart."""
    acted = sorted(
        (o for o in result.objects if o.would_execute or any(d.matched for d in o.days)),
        key=lambda o: (-o.would_execute, o.id),
    )[:CHARTED]
    return [
        {"object": o, "chart": object_chart(o, colour)}
        for o, colour in zip(acted, PALETTE, strict=False)
    ]


@get("/ui/adrules/rules/{rule_id:int}/backtest")
async def backtest_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    rule_id: FromPath[int],
    since: FromQuery[str | None] = None,
    until: FromQuery[str | None] = None,
    account_id: FromQuery[str | None] = None,
    evaluate_at: FromQuery[str | None] = None,
) -> Template:
    async with runtime.db.read() as session:
        view = await rule_views.view_rule(
            session, workspace_id=principal.workspace_id, rule_id=rule_id
        )
        accounts = [
            a
            for a in await account_service.list_accounts(session, principal.workspace_id)
            if a.id in view.account_ids
        ]
    today = runtime.clock.now().date()
    form = {
        "since": since or (today - timedelta(days=7)).isoformat(),
        "until": until or (today - timedelta(days=1)).isoformat(),
        "account_id": account_id or "",
        "evaluate_at": evaluate_at or "23:59",
    }
    result, errors, status = None, [], 200
    if since is not None or until is not None:
        try:
            data = msgspec.convert(
                {
                    "since": form["since"],
                    "until": form["until"],
                    "evaluate_at": form["evaluate_at"],
                    "account_ids": [int(form["account_id"])]
                    if form["account_id"].isdigit()
                    else [],
                },
                BacktestIn,
            )
        except msgspec.ValidationError as exc:
            errors, status = [_plain(str(exc))], 422
        else:
            try:
                result = await backtest_saved(
                    preview_deps(runtime),
                    workspace_id=principal.workspace_id,
                    rule_id=rule_id,
                    data=data,
                )
            except DomainError as exc:
                errors, status = error_messages(exc, LABELS), exc.status
    template = page(
        request,
        "adrules/backtest.html",
        principal,
        rule=view.rule,
        accounts=accounts,
        form=form,
        errors=errors,
        result=result,
        charts=charts(result) if result is not None else [],
        actions=result.actions[:LISTED] if result is not None else [],
        listed=LISTED,
    )
    template.status_code = status
    return template


def _plain(message: str) -> str:
    """A decoding error as a person reads it (``… - at `$.since` `` → ``From: …``)."""
    for field, label in LABELS.items():
        marker = f" - at `$.{field}`"
        if marker in message:
            return f"{label}: {message.replace(marker, '')}"
    return message


ROUTES: list[Any] = [backtest_page]
