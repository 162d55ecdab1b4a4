"""The share of this machine's CPU time that its hypervisor gave to others (Linux's *steal*
time, from ``/proc/stat``) during a measurement.

On a virtual machine, steal is CPU time the guest wanted but did not get: while it is high, every
process here runs slower and its latencies stretch, a database-free hello-world endpoint's as
much as anything else's. The benchmarks print it beside each figure so that a figure taken while
the host was busy elsewhere can be told from one that measures this project.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

_STAT = Path("/proc/stat")


@dataclass(frozen=True, slots=True)
class CpuTimes:
    total: int
    steal: int
    idle: int = 0
    """Idle time, not counting time waiting for the disk (iowait)."""

    @classmethod
    def now(cls) -> CpuTimes | None:
        """The machine's CPU times so far, in clock ticks; ``None`` where ``/proc/stat`` is not."""
        try:
            first = _STAT.read_text().splitlines()[0].split()
        except (OSError, IndexError):
            return None
        # cpu  user nice system idle iowait irq softirq steal guest guest_nice; guest time is
        # already counted in user and nice.
        ticks = [int(v) for v in first[1:9]]
        return cls(total=sum(ticks), steal=ticks[7], idle=ticks[3])


def steal_percent(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """Steal between two readings, in percent of all CPUs' time; ``None`` if either is missing."""
    if before is None or after is None or after.total <= before.total:
        return None
    return 100.0 * (after.steal - before.steal) / (after.total - before.total)


def busy_percent(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """CPU time not idle between two readings (running, waiting for the disk or taken by the
    hypervisor), in percent of all CPUs' time; ``None`` if either reading is missing."""
    if before is None or after is None or after.total <= before.total:
        return None
    return 100.0 * (1 - (after.idle - before.idle) / (after.total - before.total))


async def quiet(
    *, below_percent: float = 15.0, over_seconds: float = 0.5, most: float = 30.0
) -> None:
    """Return once the machine has been busy less than ``below_percent`` over ``over_seconds``
    (or after ``most`` seconds): work that an earlier measurement left to the background — a
    database's checkpoint or autovacuum, writeback of what it wrote — otherwise lands in the
    next measurement's latencies."""
    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        before = CpuTimes.now()
        await asyncio.sleep(over_seconds)
        busy = busy_percent(before, CpuTimes.now())
        if busy is None or busy < below_percent:
            return
