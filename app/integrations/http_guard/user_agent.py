"""The default ``User-Agent`` of outbound requests (providers ask for one that names the caller,
and it lets a receiver tell our calls apart). The operator may set another with
``OUTBOUND_USER_AGENT``; it reaches every client through :class:`ClientOptions`."""

from __future__ import annotations

from app.settings import DEFAULT_USER_AGENT

USER_AGENT = DEFAULT_USER_AGENT
