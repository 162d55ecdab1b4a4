"""The platform stop (spec AR-23): one question — may automated ad actions run for this workspace
now? — answered from three switches:

* ``PLATFORM_STOP`` in the environment (the whole installation; an operator's switch);
* a runtime switch for an organisation (every workspace in it), set by an organisation owner or
  admin in the dashboard or the API;
* a runtime switch for one workspace, set by an admin of that workspace.

The sweep asks before dispatching a rule; the worker asks at the start of a run and again
immediately before every Graph write and every notification, so work already queued or deferred
when a switch goes on stops too. What was not touched is recorded as skipped with the reason
``platform_stop``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, or_, select

from app.db.dialect import row_count
from app.db.session import Database, ReadSession, WriteSession
from app.engines.adrules.models import StopSwitch
from app.platform import audit
from app.platform.models import Workspace

PLATFORM_STOP = "platform_stop"
"""The reason code a record or batch carries when a stop kept it from acting."""

ENV_REASON = "PLATFORM_STOP is set for this installation"


@dataclass(frozen=True, slots=True)
class StopState:
    """Which switches are on for one workspace (what the dashboard and the API show)."""

    environment: bool
    organisation: StopSwitch | None
    workspace: StopSwitch | None

    @property
    def stopped(self) -> bool:
        return self.environment or self.organisation is not None or self.workspace is not None

    def reason(self) -> str | None:
        """``platform_stop: <why>`` when stopped (the text records carry), else None."""
        if self.environment:
            return f"{PLATFORM_STOP}: {ENV_REASON}"
        for scope, switch in (("organisation", self.organisation), ("workspace", self.workspace)):
            if switch is not None:
                note = f" ({switch.reason})" if switch.reason else ""
                return (
                    f"{PLATFORM_STOP}: the {scope} stop was set by {switch.stopped_by} at "
                    f"{switch.stopped_at:%Y-%m-%d %H:%M} UTC{note}"
                )
        return None


def org_key(organisation_id: int) -> str:
    return f"org:{organisation_id}"


def workspace_key(workspace_id: int) -> str:
    return f"ws:{workspace_id}"


async def stop_state(session: ReadSession, workspace_id: int, environment: bool) -> StopState:
    """The switches that apply to ``workspace_id``."""
    organisation_id = await session.scalar(
        select(Workspace.organisation_id).where(Workspace.id == workspace_id)
    )
    keys = [workspace_key(workspace_id)]
    if organisation_id is not None:
        keys.append(org_key(organisation_id))
    switches = {
        s.scope_key: s
        for s in (
            await session.execute(select(StopSwitch).where(StopSwitch.scope_key.in_(keys)))
        ).scalars()
    }
    return StopState(
        environment=environment,
        organisation=switches.get(org_key(organisation_id)) if organisation_id else None,
        workspace=switches.get(workspace_key(workspace_id)),
    )


async def stopped_workspaces(session: ReadSession, workspace_ids: set[int]) -> dict[int, str]:
    """The reason per workspace of ``workspace_ids`` a runtime switch stops (one query)."""
    if not workspace_ids:
        return {}
    rows = (
        await session.execute(
            select(Workspace.id, Workspace.organisation_id).where(Workspace.id.in_(workspace_ids))
        )
    ).all()
    org_of = {ws: org for ws, org in rows}
    switches = (
        (
            await session.execute(
                select(StopSwitch).where(
                    or_(
                        StopSwitch.workspace_id.in_(workspace_ids),
                        (StopSwitch.workspace_id.is_(None))
                        & StopSwitch.organisation_id.in_(set(org_of.values())),
                    )
                )
            )
        )
        .scalars()
        .all()
    )
    out: dict[int, str] = {}
    for ws, org in org_of.items():
        state = StopState(
            environment=False,
            organisation=next(
                (s for s in switches if s.workspace_id is None and s.organisation_id == org), None
            ),
            workspace=next((s for s in switches if s.workspace_id == ws), None),
        )
        reason = state.reason()
        if reason is not None:
            out[ws] = reason
    return out


class StopCheck:
    """Asks the database (and the environment flag) whether a workspace is stopped. Called
    immediately before each write, so a switch set during a run holds from the next write on."""

    def __init__(self, db: Database, environment: Callable[[], bool]) -> None:
        self._db = db
        self._environment = environment

    async def reason(self, workspace_id: int) -> str | None:
        if self._environment():
            return f"{PLATFORM_STOP}: {ENV_REASON}"
        async with self._db.read() as session:
            state = await stop_state(session, workspace_id, environment=False)
        return state.reason()


async def set_stop(
    session: WriteSession,
    *,
    organisation_id: int,
    workspace_id: int | None,
    reason: str,
    stopped_by: str,
    now: datetime,
) -> StopSwitch:
    """Turn a switch on (``workspace_id`` None: the whole organisation). Setting it again keeps
    the first setter and time: the stop has been on since then."""
    key = org_key(organisation_id) if workspace_id is None else workspace_key(workspace_id)
    existing = await session.scalar(select(StopSwitch).where(StopSwitch.scope_key == key))
    if existing is not None:
        return existing
    switch = StopSwitch(
        scope_key=key,
        organisation_id=organisation_id,
        workspace_id=workspace_id,
        reason=reason.strip()[:500],
        stopped_by=stopped_by[:200],
        stopped_at=now,
    )
    session.add(switch)
    await session.flush()
    await _audit(session, "stop.set", organisation_id, workspace_id, now, {"reason": switch.reason})
    return switch


async def _audit(
    session: WriteSession,
    action: str,
    organisation_id: int,
    workspace_id: int | None,
    now: datetime,
    after: dict[str, str] | None = None,
) -> None:
    await audit.record(
        session,
        action=action,
        object_type="organisation_stop" if workspace_id is None else "workspace_stop",
        object_id=organisation_id if workspace_id is None else workspace_id,
        workspace_id=workspace_id,
        organisation_id=organisation_id,
        after=after,
        now=now,
    )


async def clear_stop(
    session: WriteSession, *, organisation_id: int, workspace_id: int | None, now: datetime
) -> bool:
    """Turn a switch off; False when it was not on."""
    key = org_key(organisation_id) if workspace_id is None else workspace_key(workspace_id)
    result = await session.execute(delete(StopSwitch).where(StopSwitch.scope_key == key))
    cleared = bool(row_count(result))
    if cleared:
        await _audit(session, "stop.cleared", organisation_id, workspace_id, now)
    return cleared
