"""The test runtime's clock as what it is: the ``runtime`` fixture runs on a ManualClock."""

from __future__ import annotations

from app.clock import ManualClock
from app.runtime import Runtime


def manual_clock(runtime: Runtime) -> ManualClock:
    """``runtime``'s clock, which a test moves by hand (the ``runtime`` fixture's ManualClock)."""
    clock = runtime.clock
    assert isinstance(clock, ManualClock), "a runtime on the system clock cannot be moved"
    return clock
