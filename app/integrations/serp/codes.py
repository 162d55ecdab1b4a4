"""The provider's status codes and what each one means for us.

The provider answers HTTP 200 for almost everything and puts the outcome in ``status_code``, once for
the whole request (the envelope) and once per task. This module is the one place that reads them.
"""

from __future__ import annotations

from typing import Final, Literal

OK: Final = 20000
TASK_CREATED: Final = 20100
AUTH_FAILED: Final = 40100
NO_RESULTS: Final = 40102
PAYMENT_REQUIRED: Final = 40200
RATE_LIMIT: Final = 40202
TOO_MANY_TASKS: Final = 40006
NOT_FOUND: Final = 40400
INVALID_FIELD: Final = 40501
TASK_HANDED: Final = 40601
TASK_IN_QUEUE: Final = 40602
INTERNAL_ERROR: Final = 50000

TaskState = Literal["ok", "in_queue", "no_results", "error"]

IN_QUEUE_CODES: Final = frozenset({TASK_HANDED, TASK_IN_QUEUE})
TRANSIENT_CODES: Final = frozenset({RATE_LIMIT, INTERNAL_ERROR})
"""Codes after which the same request may succeed later. Every ``5xxxx`` code counts too."""


def is_transient(status_code: int) -> bool:
    return status_code in TRANSIENT_CODES or 50000 <= status_code < 60000


def task_state(status_code: int) -> TaskState:
    """The state of a fetched task: ready with results, still queued, explicitly empty, or failed.

    "Still in queue" is a state to poll again, never a missing result; "no results" is the
    provider's explicit answer that the search has nothing, distinct from a failure.
    """
    if status_code == OK:
        return "ok"
    if status_code in IN_QUEUE_CODES:
        return "in_queue"
    if status_code == NO_RESULTS:
        return "no_results"
    return "error"
