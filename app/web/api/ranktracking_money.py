"""The organisation's position-tracking money and the workspace's activity feed in the JSON API
under ``/api/v1/ranktracking``: the balance, a top-up (organisation managers; accepts an
``Idempotency-Key`` header), the ledger and the activity feed."""

from __future__ import annotations

from typing import Any

from litestar import Response, get, post
from litestar.params import FromQuery, JSONBody

from app.db.session import UnitOfWork
from app.engines.ranktracking import money
from app.engines.ranktracking.schemas import ActivityPage, BalanceOut, LedgerPage, TopUpIn
from app.web.api.common import Once
from app.web.auth import CurrentPrincipal, require_organisation_manager
from app.web.deps import CurrentClock, Cursor, Reads


@get("/balance")
async def get_balance(principal: CurrentPrincipal, session: Reads) -> BalanceOut:
    return await money.balance_out(session, principal.organisation_id)


@post("/balance/top-ups")
async def top_up(
    principal: CurrentPrincipal, once: Once, clock: CurrentClock, data: JSONBody[TopUpIn]
) -> Response[BalanceOut]:
    require_organisation_manager(principal)

    async def action(uow: UnitOfWork) -> BalanceOut:
        await money.top_up(
            uow.session,
            organisation_id=principal.organisation_id,
            workspace_id=principal.workspace_id,
            amount_eur=data.amount_eur,
            note=data.note,
            now=clock.now(),
        )
        return await money.balance_out(uow.session, principal.organisation_id)

    return await once(action)


@get("/ledger")
async def get_ledger(
    principal: CurrentPrincipal, session: Reads, cursor: Cursor = None
) -> LedgerPage:
    return await money.ledger_page(session, principal.organisation_id, cursor)


@get("/activity")
async def get_activity(
    principal: CurrentPrincipal,
    session: Reads,
    cursor: Cursor = None,
    schedule_id: FromQuery[int | None] = None,
) -> ActivityPage:
    return await money.activity_page(
        session, principal.workspace_id, cursor, schedule_id=schedule_id
    )


HANDLERS: list[Any] = [get_balance, top_up, get_ledger, get_activity]
