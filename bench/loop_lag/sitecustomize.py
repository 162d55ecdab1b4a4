"""How long a benchmarked process's event loop keeps its tasks waiting.

Put this folder on a process's ``PYTHONPATH`` with ``LOOP_LAG_FILE`` set (``bench/system_mail.py
--loop-lag`` does): every uvloop loop the process makes then runs one more task, which sleeps
2 ms again and again and notes how late it wakes: how long any task that became ready meanwhile
(an SMTP reply read, an HTTP request, a lease renewal) waited for its turn. Each wake is
appended to the file as ``<unix time> <ms late>``, a second's worth at a time. A thread looks
at that task's last wake every 10 ms: when it is over 50 ms ago, what the loop's thread is doing
then goes to ``<file>.stacks`` (once a hold).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import traceback

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None

SLEEP = 0.002
LONG_HOLD = 0.05


def _watch(loop: asyncio.AbstractEventLoop, path: str) -> None:
    last_wake = [time.perf_counter()]

    async def late() -> None:
        lines: list[str] = []
        flushed = time.monotonic()
        try:
            while True:
                began = time.perf_counter()
                await asyncio.sleep(SLEEP)
                last_wake[0] = woke = time.perf_counter()
                lines.append(f"{time.time():.4f} {(woke - began - SLEEP) * 1e3:.3f}\n")
                if time.monotonic() - flushed >= 1.0:
                    with open(path, "a") as out:
                        out.writelines(lines)
                    lines.clear()
                    flushed = time.monotonic()
        finally:
            with open(path, "a") as out:
                out.writelines(lines)

    def started() -> None:
        loop_thread = threading.get_ident()
        loop.create_task(late())

        def holds() -> None:
            reported = 0.0
            while not loop.is_closed():
                time.sleep(0.01)
                wake = last_wake[0]
                if time.perf_counter() - wake > LONG_HOLD and wake != reported:
                    reported = wake
                    frame = sys._current_frames().get(loop_thread)
                    if frame is not None:
                        with open(path + ".stacks", "a") as out:
                            stack = "".join(traceback.format_stack(frame))
                            out.write(f"--- {time.time():.4f}\n{stack}")

        threading.Thread(target=holds, name="loop-holds", daemon=True).start()

    loop.call_soon(started)


if uvloop is not None and os.environ.get("LOOP_LAG_FILE"):
    _new_event_loop = uvloop.new_event_loop

    def new_event_loop() -> asyncio.AbstractEventLoop:
        loop = _new_event_loop()
        _watch(loop, os.environ["LOOP_LAG_FILE"])
        return loop

    uvloop.new_event_loop = new_event_loop
