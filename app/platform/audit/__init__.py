"""The audit log: who did what, from where, in an organisation (PL-11).

Services call :func:`record` in their unit of work where an action happens; the web layer tells
it who is calling and from where (:mod:`app.web.audit_origin`). Entries are append-only in the
database, kept ``AUDIT_RETENTION_DAYS``, and readable by the organisation's owners and admins.
"""

from __future__ import annotations

from app.platform.audit.origin import ANONYMOUS, SYSTEM, Actor, actor_of
from app.platform.audit.record import SECRET_SET, record

__all__ = ["ANONYMOUS", "SECRET_SET", "SYSTEM", "Actor", "actor_of", "record"]
