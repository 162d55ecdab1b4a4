"""The process's one TLS context for outside APIs.

Building a context loads the whole bundle of trusted roots (certifi's, as httpx does by default):
about 35 ms of CPU each time on this project's machines, paid by every client and twice by a
guarded transport when each built its own. Every outbound client shares this one instead; a
context only verifies, so sharing it changes nothing a connection checks.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The context every outbound connection verifies its server with: httpx's default (the
    certifi roots, host names checked), never the environment's ``SSL_CERT_*`` (the clients do
    not trust the environment, as they do not take its proxies)."""
    return httpx.create_ssl_context(verify=True, trust_env=False)
