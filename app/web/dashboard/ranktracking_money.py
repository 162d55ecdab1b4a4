"""The organisation's position-tracking balance page under ``/ui/ranktracking/balance``: the
balance with its history, the ledger, the activity feed, and a top-up (organisation managers)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, get, post
from litestar.params import FromQuery, URLEncodedBody
from litestar.response import Redirect, Template

from app.engines.ranktracking import amounts, money
from app.engines.ranktracking.balance_history import balance_history
from app.errors import DomainError
from app.web.auth import CurrentPrincipal, require_organisation_manager
from app.web.dashboard.common import page
from app.web.dashboard.ranktracking_forms import decimal_of
from app.web.deps import CurrentClock, Reads, Writes

PREFIX = "/ui/ranktracking"


class TopUpForm(msgspec.Struct, kw_only=True):
    amount_eur: str = ""


@get(f"{PREFIX}/balance")
async def balance_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    cursor: FromQuery[str | None] = None,
    notice: FromQuery[str | None] = None,
) -> Template:
    balance = await money.balance_out(session, principal.organisation_id)
    entries = await money.ledger_page(session, principal.organisation_id, cursor)
    feed = await money.activity_page(session, principal.workspace_id, None, limit=30)
    history = await balance_history(session, principal.organisation_id, clock.now())
    return page(
        request,
        "ranktracking/balance.html",
        principal,
        balance=balance,
        history=msgspec.to_builtins(history),
        ledger=entries,
        feed=feed.items,
        notice=notice,
        eur_up=amounts.eur_up,
        eur_down=amounts.eur_down,
        exact_eur=amounts.exact_eur,
    )


@post(f"{PREFIX}/balance/top-ups")
async def top_up(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, data: URLEncodedBody[TopUpForm]
) -> Redirect:
    require_organisation_manager(principal)
    amount = decimal_of(data.amount_eur) or Decimal(0)
    try:
        async with uow.attempt():
            await money.top_up(
                uow.session,
                organisation_id=principal.organisation_id,
                workspace_id=principal.workspace_id,
                amount_eur=amount,
                note="dashboard top-up",
                now=clock.now(),
            )
        text = f"Added {amount} EUR"
    except DomainError as exc:
        text = exc.message
    return Redirect(f"{PREFIX}/balance?notice={quote(text)}")


ROUTES: list[Any] = [balance_page, top_up]
