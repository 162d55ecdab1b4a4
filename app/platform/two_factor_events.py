"""Security events of two-factor sign-in, all through :func:`record`.

One function on purpose: every enrolment, disabling, recovery-code use, new set of recovery
codes, burst of wrong codes and change of the organisation's requirement passes here. Each goes
in the organisation's audit log, in the caller's unit of work (the entry commits with what it
records, or neither does), and out as a log line for the operator; never with the codes
themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from app.db.session import WriteSession
from app.platform import audit

log = logging.getLogger("app.security.two_factor")

TwoFactorEvent = Literal[
    "two_factor.enrolled",
    "two_factor.disabled",
    "two_factor.recovery_code_used",
    "two_factor.recovery_codes_regenerated",
    "two_factor.failed_code_burst",
    "two_factor.requirement_changed",
]


async def record(
    session: WriteSession,
    event: TwoFactorEvent,
    *,
    user_id: int,
    organisation_id: int,
    now: datetime,
    actor: audit.Actor | None = None,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
) -> None:
    """Record that ``event`` happened to (or was done by) ``user_id``.

    ``actor`` is who did it when the request has no signed-in caller yet (the sign-in steps: the
    person themself once their code passed, an anonymous caller for a burst of wrong codes);
    by default the request's caller, or the system outside a request (the operator's command).
    A change of the requirement is about the organisation, every other event about the person.
    """
    about_organisation = event == "two_factor.requirement_changed"
    entry = await audit.record(
        session,
        action=event,
        object_type="organisation" if about_organisation else "user",
        object_id=organisation_id if about_organisation else user_id,
        organisation_id=organisation_id,
        before=before,
        after=after,
        now=now,
        actor=actor,
    )
    log.warning(
        "security event %s: user %s, organisation %s, from %s",
        event,
        user_id,
        organisation_id,
        entry.client_address or "-",
        extra={
            "security_event": event,
            "user_id": user_id,
            "organisation_id": organisation_id,
            "client_address": entry.client_address or None,
        },
    )
