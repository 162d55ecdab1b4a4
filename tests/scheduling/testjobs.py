"""Job specs used by the scheduling tests, importable by the test subprocesses too.

``RECORD`` counts every start and every completion per key in :data:`RUNS` (in-process tests) and,
when ``SWEEPLINE_TEST_MARKERS`` names a file, appends ``start``/``done`` lines to it (subprocesses).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from app.logs import current_correlation
from app.scheduling.jobs import JobContext, JobPayload, JobSpec


class Work(JobPayload, frozen=True):
    key: str
    fail_until_attempt: int = 0
    """Raise on every attempt up to and including this one."""
    seconds: float = 0.0
    """Real seconds to spend (overridden by ``SWEEPLINE_TEST_JOB_SECONDS`` when set)."""
    wait_for_release: bool = False
    """Block until the test sets :data:`RELEASE` for this key."""


@dataclass
class Runs:
    started: Counter[str] = field(default_factory=Counter)
    done: Counter[str] = field(default_factory=Counter)
    attempts: dict[str, list[int]] = field(default_factory=dict)
    times: dict[str, list[float]] = field(default_factory=dict)
    release: dict[str, asyncio.Event] = field(default_factory=dict)
    correlation: dict[str, str | None] = field(default_factory=dict)
    refused: Counter[str] = field(default_factory=Counter)
    cancelled: Counter[str] = field(default_factory=Counter)

    def reset(self) -> None:
        self.refused.clear()
        self.cancelled.clear()
        self.correlation.clear()
        self.started.clear()
        self.done.clear()
        self.attempts.clear()
        self.times.clear()
        self.release.clear()

    def gate(self, key: str) -> asyncio.Event:
        return self.release.setdefault(key, asyncio.Event())


RUNS = Runs()


def _mark(line: str) -> None:
    path = os.environ.get("SWEEPLINE_TEST_MARKERS")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


async def record(ctx: JobContext, work: Work) -> None:
    loop = asyncio.get_running_loop()
    RUNS.started[work.key] += 1
    RUNS.attempts.setdefault(work.key, []).append(ctx.attempt)
    RUNS.times.setdefault(work.key, []).append(loop.time())
    RUNS.correlation[work.key] = current_correlation()
    _mark(f"start {work.key} {ctx.attempt} {os.getpid()}")
    await asyncio.sleep(0)  # give other workers a chance to interleave
    if work.wait_for_release:
        await RUNS.gate(work.key).wait()
    seconds = float(os.environ.get("SWEEPLINE_TEST_JOB_SECONDS", work.seconds))
    if seconds:
        await asyncio.sleep(seconds)  # the job's own work, taking real time
    if ctx.attempt <= work.fail_until_attempt:
        raise RuntimeError(f"boom at attempt {ctx.attempt}")
    RUNS.done[work.key] += 1
    _mark(f"done {work.key} {ctx.attempt} {os.getpid()}")


RECORD = JobSpec("test.record", Work, record, max_tries=3, backoff_seconds=10.0)
"""Retries after 10 s, then 20 s; dead after the third failed attempt."""

RECORD_FAST_RETRY = JobSpec(
    "test.record_fast_retry", Work, record, max_tries=2, backoff_seconds=0.3
)
"""For backends on real time (arq): retries after 0.3 s, dead after the second failure."""

RECORD_SHORT_TIMEOUT = JobSpec(
    "test.record_short_timeout", Work, record, max_tries=2, timeout_seconds=0.2
)


class CallOut(JobPayload, frozen=True):
    key: str
    url: str = ""
    """Base URL of a loopback simulator: each call is ``GET {url}/call/{attempt}``."""
    smtp_port: int = 0
    """Or an SMTP sink: each call is one message to it (``Subject: attempt {attempt}``)."""
    calls: int = 2


async def call_out(ctx: JobContext, work: CallOut) -> None:
    """Make ``work.calls`` outside calls, waiting for the test's gate ``{key}:{attempt}`` after
    each but the last. The job keeps going when it is cancelled (as code that swallows the
    cancellation would), so what stops it is the refused call itself."""
    from app.integrations.http_guard import outbound_client
    from app.integrations.mail import OutgoingEmail
    from app.integrations.mail.sender import MailSender
    from app.scheduling.claim import LeaseLost

    RUNS.started[work.key] += 1
    RUNS.attempts.setdefault(work.key, []).append(ctx.attempt)
    mail = MailSender(dataclasses.replace(ctx.settings.mail, smtp_port=work.smtp_port))
    async with outbound_client(provider="test") as http:
        for n in range(work.calls):
            try:
                if work.smtp_port:
                    await mail.send(
                        OutgoingEmail(
                            to=["a@example.com"],
                            subject=f"attempt {ctx.attempt}",
                            text="",
                            message_id=f"<{work.key}.{ctx.attempt}.{n}@test>",
                        )
                    )
                else:
                    await http.get(f"{work.url}/call/{ctx.attempt}")
            except LeaseLost:
                RUNS.refused[work.key] += 1
                raise
            if n + 1 < work.calls:
                gate = RUNS.gate(f"{work.key}:{ctx.attempt}")
                while not gate.is_set():
                    try:
                        await gate.wait()
                    except asyncio.CancelledError:
                        RUNS.cancelled[work.key] += 1
    RUNS.done[work.key] += 1


CALL_OUT = JobSpec("test.call_out", CallOut, call_out, max_tries=3, backoff_seconds=0.1)


class HeapProbe(JobPayload, frozen=True):
    key: str


async def heap_probe(ctx: JobContext, probe: HeapProbe) -> None:
    """Note how many objects the process running the job has frozen (``frozen {key} {count}``)."""
    _mark(f"frozen {probe.key} {gc.get_freeze_count()} {os.getpid()}")


HEAP_PROBE = JobSpec("test.heap_probe", HeapProbe, heap_probe)

ALL: list[JobSpec[Any]] = [RECORD, RECORD_FAST_RETRY, RECORD_SHORT_TIMEOUT, CALL_OUT, HEAP_PROBE]
