"""HTTP load from wrk, a separate C process, so the client never shares the server's event loop
and is not the bottleneck (an httpx client tops out near 2,000 requests/s on one core here).

Every request carries a unique ``event_id`` (``<tag>-<thread>-<n>``), so the caller can count what
was stored against what wrk says it completed.

``WRK_CPU`` (optional) lists the CPUs wrk runs on (``taskset -c``). With the benchmark itself
started under ``taskset -c`` on the others, the load generator has a core of its own and is never
descheduled by the server it measures (on a two-core machine: ``WRK_CPU=0 taskset -c 1 …``).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cpu_steal import CpuTimes, steal_percent

# One Lua state per wrk thread: setup() numbers the threads, so ids never repeat across threads.
_SCRIPT = """
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  counter = counter + 1
  local body = string.format(
    '{"event_id":"%s-%d-%d","name":"order_placed","contact":{"email":"c%d@example.com"},'
    .. '"properties":{"total":%d}}', TAG, tid, counter, counter % 500, counter)
  return wrk.format(nil, nil, nil, body)
end
"""

_REQUESTS = re.compile(r"(\d+) requests in")
_RATE = re.compile(r"Requests/sec:\s+([0-9.]+)")
_LATENCY = re.compile(r"^\s+(50|99)(?:\.000)?%\s+([0-9.]+)(us|ms|s)\s*$", re.M)
_ERRORS = re.compile(r"Non-2xx or 3xx responses: (\d+)|Socket errors: .*")
_UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


@dataclass(frozen=True)
class WrkResult:
    rate: float
    p50_ms: float
    p99_ms: float
    requests: int
    steal_pct: float | None
    """The machine's CPU time taken by the hypervisor while wrk ran (``bench/cpu_steal.py``)."""


def available() -> bool:
    return shutil.which("wrk") is not None


async def post_events(
    url: str, *, tag: str, seconds: float, connections: int, headers: dict[str, str]
) -> WrkResult:
    """POST JSON events to ``url`` for ``seconds`` over ``connections`` keep-alive connections."""
    fd, name = tempfile.mkstemp(prefix=f"wrk-{tag}-", suffix=".lua")
    os.close(fd)
    script = Path(name)
    script.write_text(f'TAG = "{tag}"\n' + _SCRIPT)
    threads = min(2, connections)
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency"]
    cmd += ["--timeout", "10s", "-s", str(script)]
    if cpus := os.environ.get("WRK_CPU"):
        cmd = ["taskset", "-c", cpus, *cmd]
    for key, value in headers.items():
        cmd += ["-H", f"{key}: {value}"]
    try:
        began = CpuTimes.now()
        proc = await asyncio.create_subprocess_exec(
            *cmd, url, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out = (await proc.communicate())[0].decode()
        steal = steal_percent(began, CpuTimes.now())
    finally:
        script.unlink(missing_ok=True)
    rate, done = _RATE.search(out), _REQUESTS.search(out)
    if proc.returncode != 0 or rate is None or done is None or _ERRORS.search(out):
        raise RuntimeError(f"{tag}: wrk reported failures:\n{out}")
    latency = {p: float(v) * _UNIT_MS[u] for p, v, u in _LATENCY.findall(out)}
    return WrkResult(float(rate.group(1)), latency["50"], latency["99"], int(done.group(1)), steal)
