"""The trace context a job carries from where it was queued to where it runs.

When tracing is on (:mod:`app.telemetry`) and a job is queued inside a span — a sweep tick, a
request — its stored payload is preceded by that span's W3C ``traceparent``::

    \\x00traceparent=00-<trace id>-<span id>-<flags>\\n{"the":"payload as msgspec JSON"}

so the job's run, on either queue backend and in any process, continues the same trace. The
envelope lives in the payload bytes both backends already store and hand back (the database
queue's ``payload`` column, the argument of the arq job), so it needs no column and no change to
either backend's wire format: a payload without it (tracing off, or queued before) is read as
it always was, and a worker with tracing off strips it. A JSON payload never starts with a NUL
byte, so the two cannot be confused.
"""

from __future__ import annotations

from app import telemetry

MARK = b"\x00traceparent="
_END = b"\n"


def seal(raw: bytes) -> bytes:
    """``raw`` preceded by the current span's ``traceparent`` (unchanged when there is none)."""
    traceparent = telemetry.traceparent()
    if traceparent is None:
        return raw
    return b"".join((MARK, traceparent.encode("ascii"), _END, raw))


def unseal(raw: bytes) -> tuple[str | None, bytes]:
    """The ``traceparent`` a stored payload carries (``None`` when it carries none) and the
    payload itself."""
    if not raw.startswith(MARK):
        return None, raw
    head, _, body = raw[len(MARK) :].partition(_END)
    return head.decode("ascii", "replace"), body
