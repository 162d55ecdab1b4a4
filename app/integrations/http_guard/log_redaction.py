"""Credentials never reach the logs through a request URL.

httpx logs every request's URL at INFO. Some providers document credentials as query parameters
(Meta's ``debug_token`` takes ``input_token``, its ``oauth/access_token`` takes
``client_secret`` and ``fb_exchange_token``), so the URL is redacted before any handler sees it.
The filter sits on httpx's own logger, so every outbound client goes through it.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl, urlencode

import httpx

CREDENTIAL_PARAMETERS = frozenset(
    {
        "access_token",
        "api_key",
        "apikey",
        "client_secret",
        "code",
        "fb_exchange_token",
        "input_token",
        "key",
        "password",
        "secret",
        "token",
    }
)
REDACTED = "***"


def redact_url(url: httpx.URL) -> str:
    """``url`` as text with every credential-like query value replaced by ``***``."""
    if not url.query:
        return str(url)
    pairs = parse_qsl(url.query.decode("ascii", "replace"), keep_blank_values=True)
    redacted = [
        (name, REDACTED if name.lower() in CREDENTIAL_PARAMETERS else value)
        for name, value in pairs
    ]
    return str(url.copy_with(query=urlencode(redacted).encode("ascii")))


class RedactCredentialsInUrls(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, httpx.URL) for a in record.args):
            record.args = tuple(
                redact_url(a) if isinstance(a, httpx.URL) else a for a in record.args
            )
        return True


def install() -> None:
    """Put the filter on httpx's logger once (idempotent)."""
    logger = logging.getLogger("httpx")
    if not any(isinstance(f, RedactCredentialsInUrls) for f in logger.filters):
        logger.addFilter(RedactCredentialsInUrls())
