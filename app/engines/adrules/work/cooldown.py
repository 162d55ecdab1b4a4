"""Cooldown arithmetic (spec AR-17, AR-21): may a task act on a campaign now, and from when again.

Pure functions of the last *executed* result and ``now``. A task's action frequency is one of the
11 cooldowns; "once in a lifetime" means that after one executed action the task never acts on that
campaign again. Only executed results start a cooldown: a skipped, not-executed or failed run does
not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.engines.adrules.catalogue import COOLDOWN_DURATIONS, COOLDOWN_LABELS, Cooldown


@dataclass(frozen=True, slots=True)
class LastExecution:
    """The latest executed result of one task on one campaign."""

    executed_at: datetime
    next_permitted_at: datetime | None
    """``None`` after a once-in-a-lifetime action: never again."""


@dataclass(frozen=True, slots=True)
class CooldownVerdict:
    allowed: bool
    reason: str = ""
    next_allowed_at: datetime | None = None
    """When the action will next be allowed (``None`` while blocked: never)."""


def next_permitted_at(executed_at: datetime, cooldown: Cooldown) -> datetime | None:
    """When a task that executed at ``executed_at`` may act again (``None``: never)."""
    duration = COOLDOWN_DURATIONS[cooldown]
    return None if duration is None else executed_at + duration


def check_cooldown(
    last: LastExecution | None, cooldown: Cooldown, now: datetime
) -> CooldownVerdict:
    """Whether the task may act now. Checked before every action, before anything is written."""
    if last is None:
        return CooldownVerdict(allowed=True)
    if cooldown == "lifetime" or last.next_permitted_at is None:
        return CooldownVerdict(
            allowed=False,
            reason=(
                "once in a lifetime: this task already acted on this campaign at "
                f"{last.executed_at:%Y-%m-%d %H:%M} UTC"
            ),
        )
    if last.next_permitted_at > now:
        return CooldownVerdict(
            allowed=False,
            reason=(
                f"cooldown of {COOLDOWN_LABELS[cooldown]}: last executed at "
                f"{last.executed_at:%Y-%m-%d %H:%M} UTC, next allowed at "
                f"{last.next_permitted_at:%Y-%m-%d %H:%M} UTC"
            ),
            next_allowed_at=last.next_permitted_at,
        )
    return CooldownVerdict(allowed=True)
