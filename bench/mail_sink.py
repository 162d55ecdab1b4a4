"""A counting SMTP server for the mail benchmarks, in a process of its own.

aiosmtpd on a free loopback port, in a child process (so the server does not share the senders'
interpreter), counting what it accepts by Message-ID and noting when the first and the last
message of the current count arrived (wall-clock seconds, comparable with ``time.time()`` in
the benchmark's own process). Each :meth:`Sink.take` returns what arrived since the previous
one and starts a new count.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

SINK = r"""
import re, socket, sys, threading, time
from collections import Counter
from aiosmtpd.controller import Controller
MID = re.compile(rb"^Message-ID:\s*(<[^>]+>)", re.M | re.I)
counts = Counter(); lock = threading.Lock(); span = [0.0, 0.0]
class H:
    async def handle_DATA(self, server, session, envelope):
        found = MID.search(envelope.original_content or envelope.content)
        at = time.time()
        with lock:
            if not counts:
                span[0] = at
            span[1] = at
            counts[found.group(1) if found else b""] += 1
        return "250 OK"
probe = socket.socket(); probe.bind(("127.0.0.1", 0)); port = probe.getsockname()[1]; probe.close()
c = Controller(H(), hostname="127.0.0.1", port=port)
c.start()
print(port, flush=True)
for line in sys.stdin:
    with lock:
        print(sum(counts.values()), len(counts), span[0], span[1], flush=True)
        if line.strip() == "take":
            counts.clear()
c.stop()
"""


@dataclass(frozen=True, slots=True)
class Arrivals:
    total: int
    """Messages accepted."""
    distinct: int
    """Distinct Message-IDs among them."""
    first_at: float
    """When the first of them arrived (``time.time()``; 0 when none did)."""
    last_at: float
    """When the last of them arrived."""


class Sink:
    """The counting SMTP server in its own process."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SINK],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def _ask(self, what: str) -> Arrivals:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        total, distinct, first, last = self.proc.stdout.readline().split()
        return Arrivals(int(total), int(distinct), float(first), float(last))

    def peek(self) -> Arrivals:
        """What arrived since the last :meth:`take`, without starting a new count."""
        return self._ask("peek")

    def take(self) -> Arrivals:
        """What arrived since the previous call; a new count starts."""
        return self._ask("take")

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
