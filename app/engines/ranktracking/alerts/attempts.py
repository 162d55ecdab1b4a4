"""One attempt at sending an alert or a report, and the state it leaves the delivery in.

Both senders (``deliver.py`` and ``report.py``) retry the same way: a transient failure (the
mail server or the receiver busy or out of reach) is raised again so that the queue runs the job
later, unless this was the job's last attempt, when the delivery is ``failed``; a permanent
refusal fails it at once; otherwise it is ``sent``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from app.engines.ranktracking.alert_models import DELIVERY_FAILED, DELIVERY_PENDING, DELIVERY_SENT

Send = Callable[[], Awaitable[str]]
"""Sends the message; returns how it went out (for the activity feed)."""
Settle = Callable[[str, str], Awaitable[None]]
"""Writes the delivery's new state with a note: how it went out, or why it did not."""


async def send_and_settle(
    send: Send,
    settle: Settle,
    *,
    transient: tuple[type[Exception], ...],
    permanent: tuple[type[Exception], ...],
    final_attempt: bool,
) -> str:
    """Send, settle the delivery and return its new state. Before a transient error is raised
    for the retry the delivery is settled as ``pending``. ``transient`` is tried first, so it may
    hold subclasses of what ``permanent`` holds."""
    try:
        how = await send()
    except transient as exc:
        if not final_attempt:
            await settle(DELIVERY_PENDING, str(exc))
            raise
        await settle(DELIVERY_FAILED, str(exc))
        return DELIVERY_FAILED
    except permanent as exc:
        await settle(DELIVERY_FAILED, str(exc))
        return DELIVERY_FAILED
    await settle(DELIVERY_SENT, how)
    return DELIVERY_SENT
