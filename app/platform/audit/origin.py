"""Who is acting and from where, for the request being served.

The web layer sets it once per request (:mod:`app.web.audit_origin`), so service and engine code
that records an action does not pass the client's address, user agent or principal down every
call. Outside a request (sweeps, jobs) there is none and the action is the system's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Actor:
    kind: str
    """``user``, ``api_key``, ``system`` or ``anonymous``."""
    user_id: int | None = None
    api_key_id: int | None = None


SYSTEM = Actor("system")
ANONYMOUS = Actor("anonymous")


def actor_of(principal: object) -> Actor:
    """The actor of a resolved principal (anything with ``user_id`` and ``api_key_id``)."""
    user_id = getattr(principal, "user_id", None)
    api_key_id = getattr(principal, "api_key_id", None)
    if api_key_id is not None:
        return Actor("api_key", user_id, api_key_id)
    if user_id is not None:
        return Actor("user", user_id)
    return ANONYMOUS


@dataclass(frozen=True, slots=True)
class Origin:
    where: Callable[[], tuple[str, str]]
    """The client's address and user agent, worked out when an action is recorded: most requests
    record none, so none of them pays for parsing the headers."""
    principal: Callable[[], Actor | None]
    """The caller once authentication has resolved it (read when an action is recorded)."""


_ORIGIN: ContextVar[Origin | None] = ContextVar("audit_origin", default=None)


def current_origin() -> Origin | None:
    return _ORIGIN.get()


@contextmanager
def acting_from(origin: Origin) -> Iterator[None]:
    token = _ORIGIN.set(origin)
    try:
        yield
    finally:
        _ORIGIN.reset(token)
