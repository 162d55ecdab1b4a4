"""The CPU a benchmark's PostgreSQL server used, read from Linux ``/proc``."""

from __future__ import annotations

import os
from pathlib import Path


def postgres_cpu_seconds() -> float:
    """CPU used so far by every PostgreSQL process of this machine, with what its server's ended
    backends used (the postmaster's reaped children). Server-wide: a PostgreSQL nothing else uses
    while the benchmark runs is the system's own."""
    found: dict[int, list[str]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            line = stat.read_text()
        except OSError:
            continue  # ended meanwhile
        if line[line.index("(") + 1 : line.rindex(")")].startswith("postgres"):
            found[int(stat.parent.name)] = line.rpartition(")")[2].split()
    total = 0
    for fields in found.values():
        total += int(fields[11]) + int(fields[12])  # utime, stime
        if int(fields[1]) not in found:  # the postmaster: add its reaped children's
            total += int(fields[13]) + int(fields[14])
    return total / os.sysconf("SC_CLK_TCK")
