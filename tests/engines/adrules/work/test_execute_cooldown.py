"""Cooldown arithmetic for the 11 action frequencies (AR-17, AR-21)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.engines.adrules.catalogue import COOLDOWNS, Cooldown
from app.engines.adrules.work.cooldown import LastExecution, check_cooldown, next_permitted_at

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

DURATIONS = {
    "15m": timedelta(minutes=15),
    "30m": timedelta(minutes=30),
    "1h": timedelta(hours=1),
    "2h": timedelta(hours=2),
    "3h": timedelta(hours=3),
    "6h": timedelta(hours=6),
    "12h": timedelta(hours=12),
    "24h": timedelta(hours=24),
    "3d": timedelta(days=3),
    "7d": timedelta(days=7),
}


def test_there_are_eleven_cooldowns() -> None:
    assert len(COOLDOWNS) == 11
    assert set(COOLDOWNS) == {*DURATIONS, "lifetime"}


@pytest.mark.parametrize("cooldown", list(DURATIONS))
def test_ar17_cooldown_blocks_until_the_next_permitted_time(cooldown: Cooldown) -> None:
    nxt = next_permitted_at(T0, cooldown)
    assert nxt == T0 + DURATIONS[cooldown]
    last = LastExecution(executed_at=T0, next_permitted_at=nxt)
    blocked = check_cooldown(last, cooldown, nxt - timedelta(seconds=1))
    assert not blocked.allowed
    assert blocked.next_allowed_at == nxt
    assert "cooldown of" in blocked.reason
    assert check_cooldown(last, cooldown, nxt).allowed


def test_ar17_once_in_a_lifetime_never_allows_again() -> None:
    assert next_permitted_at(T0, "lifetime") is None
    last = LastExecution(executed_at=T0, next_permitted_at=None)
    verdict = check_cooldown(last, "lifetime", T0 + timedelta(days=3650))
    assert not verdict.allowed
    assert verdict.next_allowed_at is None
    assert "once in a lifetime" in verdict.reason


def test_switching_a_task_to_once_in_a_lifetime_counts_earlier_executions() -> None:
    last = LastExecution(executed_at=T0, next_permitted_at=T0 + timedelta(minutes=15))
    assert not check_cooldown(last, "lifetime", T0 + timedelta(days=1)).allowed


def test_never_executed_is_allowed() -> None:
    assert check_cooldown(None, "lifetime", T0).allowed
