"""The platform stop's runtime switches over the API (spec AR-23): read what is on for the caller's
workspace, turn the workspace's or the whole organisation's switch on or off. The organisation's
switch (every workspace in it) is for the organisation's owners and admins, signed in — a
workspace admin or a workspace API key cannot freeze other workspaces; a workspace's own switch is
for its admins. Reading is open to every member, because everyone should see that automation is
frozen."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec
from litestar import get, post
from litestar.params import JSONBody
from sqlalchemy import select

from app.db.session import ReadSession, UnitOfWork
from app.engines.adrules import stops
from app.engines.adrules.models import StopSwitch
from app.platform.models import User
from app.platform.service import Principal
from app.runtime import Runtime
from app.schemas import Schema
from app.web.api.common import api_router
from app.web.auth import (
    CurrentPrincipal,
    require_admin,
    require_organisation_manager,
)
from app.web.deps import CurrentClock, CurrentSettings, Reads, Writes

Scope = Literal["organisation", "workspace"]


class StopIn(Schema, kw_only=True):
    scope: Scope
    stopped: bool
    """True turns the switch on, False clears it."""
    reason: Annotated[str, msgspec.Meta(max_length=500)] = ""


class SwitchOut(Schema, kw_only=True):
    reason: str
    stopped_by: str
    stopped_at: datetime


class StopOut(Schema, kw_only=True):
    stopped: bool
    """Whether automated ad actions are frozen for this workspace now (any switch)."""
    environment: bool
    """``PLATFORM_STOP`` is set for the installation (only an operator can clear it)."""
    organisation: SwitchOut | None
    workspace: SwitchOut | None
    reason: str | None


def _switch(switch: StopSwitch | None) -> SwitchOut | None:
    if switch is None:
        return None
    return SwitchOut(
        reason=switch.reason, stopped_by=switch.stopped_by, stopped_at=switch.stopped_at
    )


def stop_out(state: stops.StopState) -> StopOut:
    return StopOut(
        stopped=state.stopped,
        environment=state.environment,
        organisation=_switch(state.organisation),
        workspace=_switch(state.workspace),
        reason=state.reason(),
    )


async def who(session: ReadSession, principal: Principal) -> str:
    """How a switch names the person (or key) that set it."""
    if principal.user_id is not None:
        email = await session.scalar(select(User.email).where(User.id == principal.user_id))
        if email:
            return str(email)
    if principal.api_key_id is not None:
        return f"API key {principal.api_key_id}"
    return "a workspace admin"


async def change_stop(runtime: Runtime, principal: Principal, data: StopIn) -> stops.StopState:
    """:func:`apply_stop` in a unit of work of its own, for a caller outside a request."""
    async with runtime.db.write() as uow:
        return await apply_stop(
            uow,
            principal,
            data,
            now=runtime.clock.now(),
            stop_all=runtime.settings.sweepers.stop_all,
        )


async def apply_stop(
    uow: UnitOfWork, principal: Principal, data: StopIn, *, now: datetime, stop_all: bool
) -> stops.StopState:
    """Set or clear a switch; returns the state that now applies (``stop_all``: the instance's
    own switch, from its settings). The organisation's switch takes an organisation owner or
    admin, a workspace's switch an admin of that workspace."""
    if data.scope == "organisation":
        require_organisation_manager(principal)
    else:
        require_admin(principal)
    workspace_id = principal.workspace_id if data.scope == "workspace" else None
    if data.stopped:
        await stops.set_stop(
            uow.session,
            organisation_id=principal.organisation_id,
            workspace_id=workspace_id,
            reason=data.reason,
            stopped_by=await who(uow.session, principal),
            now=now,
        )
    else:
        await stops.clear_stop(
            uow.session,
            organisation_id=principal.organisation_id,
            workspace_id=workspace_id,
            now=now,
        )
    return await stops.stop_state(uow.session, principal.workspace_id, stop_all)


@get("/stop")
async def get_stop(
    principal: CurrentPrincipal, session: Reads, settings: CurrentSettings
) -> StopOut:
    state = await stops.stop_state(session, principal.workspace_id, settings.sweepers.stop_all)
    return stop_out(state)


@post("/stop", status_code=200)
async def set_stop(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    settings: CurrentSettings,
    data: JSONBody[StopIn],
) -> StopOut:
    state = await apply_stop(
        uow, principal, data, now=clock.now(), stop_all=settings.sweepers.stop_all
    )
    return stop_out(state)


ROUTERS = [api_router("/adrules", [get_stop, set_stop], tag="adrules")]
