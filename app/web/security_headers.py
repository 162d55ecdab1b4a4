"""Security headers on every response, as a Litestar ``before_send`` hook so that answers made by
exception handlers and middleware (a CSRF 403, a 413) carry them too.

The Content-Security-Policy allows scripts, styles, images and fonts from the service's own
origin only: no inline ``<script>`` and no inline event handlers (``onclick=…``) in templates —
behaviour goes in ``/static/*.js``. ``<script type="application/json">`` data blocks are not
scripts and stay allowed. Two exceptions are spelled out: the ``<style>`` element htmx inserts for
its request indicators (allowed by its hash) and ``style="…"`` attributes (``style-src-attr``),
which templates still use. The OpenAPI pages under ``/schema`` start their viewers with an inline
script and get a policy of their own that allows it; they show no user data.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from litestar.types import Message, Scope

BeforeSend = Callable[[Message, Scope], Awaitable[None]]

# sha256 of the <style> htmx 2 inserts (".htmx-indicator{opacity:0;…}"), see htmx.min.js.
_HTMX_INDICATOR_STYLE = "'sha256-faU7yAF8NxuMTNEwVmBz+VcYeIoBQ2EMHW3WaVxCvnk='"

PAGE_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        f"style-src 'self' {_HTMX_INDICATOR_STYLE}",
        "style-src-attr 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
DOCS_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "worker-src 'self' blob:",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ]
)
HSTS = "max-age=31536000; includeSubDomains"


SHARED_PREFIX = "/shared/"
"""Pages opened by a secret link (a shared report): their address must reach no other site, not
even our own pages' ``Referer``."""


def _encoded(
    policy: str, *, hsts: bool, referrer: str = "same-origin"
) -> list[tuple[bytes, bytes]]:
    headers = {
        "content-security-policy": policy,
        "x-frame-options": "DENY",
        "x-content-type-options": "nosniff",
        "referrer-policy": referrer,
        "cross-origin-opener-policy": "same-origin",
    }
    if hsts:
        headers["strict-transport-security"] = HSTS
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]


def security_headers(*, hsts: bool) -> BeforeSend:
    """The ``before_send`` hook; ``hsts`` when the service is served over HTTPS
    (``SECURE_COOKIES``)."""
    # Encoded once: this runs for every response, ingestion at thousands a second included.
    page, docs = _encoded(PAGE_POLICY, hsts=hsts), _encoded(DOCS_POLICY, hsts=hsts)
    shared = _encoded(PAGE_POLICY, hsts=hsts, referrer="no-referrer")
    names = frozenset(name for name, _ in page)

    async def before_send(message: Message, scope: Scope) -> None:
        if message["type"] != "http.response.start":
            return
        path = str(scope.get("path", ""))
        if path == "/schema" or path.startswith("/schema/"):
            ours = docs
        else:
            ours = shared if path.startswith(SHARED_PREFIX) else page
        # These headers are ours to set: any the handler set is replaced, not doubled.
        headers = [h for h in message.get("headers", ()) if h[0].lower() not in names]
        headers.extend(ours)
        message["headers"] = headers

    return before_send
