"""The share of this machine's CPU time that its hypervisor gave to others (Linux's *steal*
time, from ``/proc/stat``) during a measurement.

On a virtual machine, steal is CPU time the guest wanted but did not get: while it is high, every
process here runs slower and its latencies stretch, a database-free hello-world endpoint's as
much as anything else's. The benchmarks print it beside each figure so that a figure taken while
the host was busy elsewhere can be told from one that measures this project.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

_STAT = Path("/proc/stat")


@dataclass(frozen=True, slots=True)
class CpuTimes:
    total: int
    steal: int

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
        return cls(total=sum(ticks), steal=ticks[7])


def steal_percent(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """Steal between two readings, in percent of all CPUs' time; ``None`` if either is missing."""
    if before is None or after is None or after.total <= before.total:
        return None
    return 100.0 * (after.steal - before.steal) / (after.total - before.total)
