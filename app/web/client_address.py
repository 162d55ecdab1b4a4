"""The client's address as far as it can be believed.

``X-Forwarded-For`` is written by whoever sends the request, so it is believed only when the peer
that connected is one of the operator's ``TRUSTED_PROXIES``; then the client is the right-most
address in the header that is not itself a trusted proxy (each proxy appends the address it saw,
so everything left of that may be the client's own invention). uvicorn's own proxy-header
handling is turned off (``serve`` passes ``proxy_headers=False``): it trusts 127.0.0.1 by default,
which would let any local client choose the address the sign-in throttle counts.
"""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any

from litestar import Request

from app.settings_web import Networks, parse_networks

__all__ = ["Networks", "client_address", "parse_networks"]


def _trusted(address: str, proxies: Networks) -> bool:
    try:
        ip = ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def client_address(request: Request[Any, Any, Any], proxies: Networks) -> str:
    peer = request.client.host if request.client else ""
    if not proxies or not _trusted(peer, proxies):
        return peer
    hops = [h.strip() for h in request.headers.get("x-forwarded-for", "").split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            try:
                return str(ip_address(hop))
            except ValueError:
                return peer  # garbage from the client side of the proxy: believe the proxy only
    return hops[0] if hops else peer
