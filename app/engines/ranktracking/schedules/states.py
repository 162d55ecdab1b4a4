"""The states of a rank-tracking schedule (``rt_schedules.status``) and the moves between them.

A schedule is created ``active``. A person pauses it (``paused_user``, RT-28) or ends it for
good (``archived``, RT-29); an admission the balance cannot cover pauses it (``paused_balance``);
resuming makes a paused schedule ``active`` again."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

ScheduleStatus = Literal["active", "paused_user", "paused_balance", "archived"]
SCHEDULE_STATUSES: tuple[ScheduleStatus, ...] = literal_states(ScheduleStatus)

ACTIVE: Final = "active"
PAUSED_USER: Final = "paused_user"
PAUSED_BALANCE: Final = "paused_balance"
ARCHIVED: Final = "archived"

SCHEDULES = StateMachine(
    table="rt_schedules",
    column="status",
    title="Rank-tracking schedule",
    states=SCHEDULE_STATUSES,
    initial=(ACTIVE,),
    transitions={
        ACTIVE: (PAUSED_USER, PAUSED_BALANCE, ARCHIVED),
        PAUSED_USER: (ACTIVE, ARCHIVED),
        PAUSED_BALANCE: (ACTIVE, PAUSED_USER, ARCHIVED),
    },
)
