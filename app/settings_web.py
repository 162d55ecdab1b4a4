"""The settings of the HTTP service: its listener (address, keep-alive, trusted proxies, the
metrics listener), its security (keys, sign-in limits, invitations, audit retention) and its rate
limits. The parsers of the listener's addresses live here, so that loading the settings already
refuses a bad one."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network, ip_network

from app.settings_fields import SettingsError, env

DEFAULT_HTTP_KEEP_ALIVE_SECONDS = 75
"""How long an HTTP server of this project keeps an idle connection open. Longer than a reverse
proxy or load balancer commonly keeps its upstream connections idle (60 s): a server closing
first races the client's next request on that connection, which then hears a reset (a 502 behind
a proxy). uvicorn's own default is 5 s."""

MAX_HTTP_KEEP_ALIVE_SECONDS = 3600  # an hour: anything longer is a typo, not a proxy's timeout

Networks = tuple[IPv4Network | IPv6Network, ...]


def parse_networks(text: str) -> Networks:
    """``TRUSTED_PROXIES`` as networks; a bad entry is a :class:`SettingsError`. Kept here, not in
    the web layer that uses the networks, so that loading the settings already refuses one."""
    out: list[IPv4Network | IPv6Network] = []
    for part in text.split(","):
        entry = part.strip()
        if not entry:
            continue
        try:
            out.append(ip_network(entry, strict=False))
        except ValueError as exc:
            raise SettingsError(f"TRUSTED_PROXIES: {entry!r} is not an address or network") from exc
    return tuple(out)


def parse_bind(name: str, text: str) -> tuple[str, int] | None:
    """A ``host:port`` setting (``[::1]:9100`` for IPv6) as its parts; empty is ``None``."""
    if not text.strip():
        return None
    host, sep, port = text.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise SettingsError(f"{name} must be host:port (e.g. 127.0.0.1:9100), not {text!r}")
    return host, int(port)


@dataclass(frozen=True, slots=True)
class WebSettings:
    host: str = env("HOST", "127.0.0.1")
    """Interface the HTTP server listens on."""
    port: int = env("PORT", 8000)
    """Port the HTTP server listens on."""
    public_url: str = env("PUBLIC_URL", "")
    """Address the service is reached at, used in links (invitations, tracking pixels, forms,
    snippets). Empty: ``http://HOST:PORT`` (127.0.0.1 when HOST listens on every interface)."""
    session_secret: str = env("SESSION_SECRET", "")
    """Secret signing dashboard session cookies; generated into the key file when empty."""
    secure_cookies: bool = env("SECURE_COOKIES", False)
    """Mark cookies Secure and send Strict-Transport-Security (set when served over HTTPS)."""
    trusted_proxies: str = env("TRUSTED_PROXIES", "")
    """Comma-separated addresses or networks (CIDR) of reverse proxies whose
    ``X-Forwarded-For`` is believed; from any other peer the header is ignored and the peer's
    own address is the client's. Empty: no proxy is trusted."""
    max_body_bytes: int = env("MAX_BODY_BYTES", 2_000_000)
    """Largest request body accepted; larger bodies answer 413."""
    log_format: str = env("LOG_FORMAT", "text")
    """``text`` (readable, development) or ``json`` (one JSON object per line, production)."""
    log_level: str = env("LOG_LEVEL", "INFO")
    """Minimum level of log lines."""
    idempotency_ttl_hours: int = env("IDEMPOTENCY_TTL_HOURS", 24)
    """How long the answer to a request with an ``Idempotency-Key`` is kept for retries."""
    keep_alive_seconds: int = env("HTTP_KEEP_ALIVE_SECONDS", DEFAULT_HTTP_KEEP_ALIVE_SECONDS)
    """Seconds ``serve`` keeps an idle client connection open (1 to 3600). Keep it longer than the
    idle timeout of a reverse proxy's or load balancer's upstream connections, or a request the
    proxy sends as the server closes the connection fails (a 502)."""
    metrics_token: str = env("METRICS_TOKEN", "")
    """Bearer token a Prometheus scrape of ``/metrics`` on the public listener must send
    (``Authorization: Bearer <token>``). Empty: ``/metrics`` answers 404 there."""
    metrics_bind: str = env("METRICS_BIND", "")
    """``host:port`` of a second listener of ``serve`` that answers ``GET /metrics`` alone,
    without the token (keep it on a private interface). Empty: no second listener."""

    def __post_init__(self) -> None:
        if not 1 <= self.keep_alive_seconds <= MAX_HTTP_KEEP_ALIVE_SECONDS:
            raise SettingsError(
                f"HTTP_KEEP_ALIVE_SECONDS must be between 1 and {MAX_HTTP_KEEP_ALIVE_SECONDS} "
                f"seconds, not {self.keep_alive_seconds}"
            )
        parse_networks(self.trusted_proxies)  # refused here, before any command does its work
        parse_bind("METRICS_BIND", self.metrics_bind)


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    encryption_key: str = env("ENCRYPTION_KEY", "")
    """Fernet key encrypting secrets at rest. Required in server mode; on the embedded default a key
    file is generated on first run."""
    key_file: str = env("KEY_FILE", "var/sweepline.key")
    """Where the embedded default keeps its generated keys."""
    sign_in_max_failures: int = env("SIGN_IN_MAX_FAILURES", 10)
    """Failed sign-ins allowed per account (e-mail address) within ``SIGN_IN_WINDOW_SECONDS``;
    further attempts are refused (429) until the window has passed."""
    sign_in_max_failures_per_address: int = env("SIGN_IN_MAX_FAILURES_PER_ADDRESS", 50)
    """Failed sign-ins allowed per client address, whatever the account, within the window."""
    sign_in_window_seconds: int = env("SIGN_IN_WINDOW_SECONDS", 900)
    """The window over which failed sign-ins are counted."""
    invitation_ttl_hours: int = env("INVITATION_TTL_HOURS", 168)
    """How long an invitation link can be accepted (it works once)."""
    audit_retention_days: int = env("AUDIT_RETENTION_DAYS", 365)
    """Days the audit log keeps an entry; the hourly sweep removes older ones."""

    def __post_init__(self) -> None:
        if self.audit_retention_days < 1:
            raise SettingsError(
                f"AUDIT_RETENTION_DAYS must be at least 1, not {self.audit_retention_days}"
            )


@dataclass(frozen=True, slots=True)
class RateLimitSettings:
    """Token buckets per API key (or signed-in person) and per workspace, reads and writes apart
    (app/platform/rate_limits.py). A request takes one token from its caller's bucket and one from
    its workspace's; without one it answers 429. Shared through Redis when REDIS_URL is set."""

    key_read_burst: int = env("RATE_LIMIT_KEY_READ_BURST", 200)
    """Reads (GET, HEAD, OPTIONS) one API key, or one signed-in person, may make in a burst; 0 turns the
    limit off."""
    key_read_per_second: float = env("RATE_LIMIT_KEY_READ_PER_SECOND", 20.0)
    """Reads per second that refill one key's burst; 0 turns the limit off."""
    key_write_burst: int = env("RATE_LIMIT_KEY_WRITE_BURST", 60)
    """Writes (every other method) one API key, or one signed-in person, may make in a burst; 0
    turns the limit off."""
    key_write_per_second: float = env("RATE_LIMIT_KEY_WRITE_PER_SECOND", 10.0)
    """Writes per second that refill one key's burst; 0 turns the limit off."""
    workspace_read_burst: int = env("RATE_LIMIT_WORKSPACE_READ_BURST", 400)
    """Reads one workspace's keys and people may make together in a burst; 0 turns the limit off."""
    workspace_read_per_second: float = env("RATE_LIMIT_WORKSPACE_READ_PER_SECOND", 40.0)
    """Reads per second that refill one workspace's burst; 0 turns the limit off."""
    workspace_write_burst: int = env("RATE_LIMIT_WORKSPACE_WRITE_BURST", 120)
    """Writes one workspace's keys and people may make together in a burst; 0 turns the limit
    off."""
    workspace_write_per_second: float = env("RATE_LIMIT_WORKSPACE_WRITE_PER_SECOND", 20.0)
    """Writes per second that refill one workspace's burst; 0 turns the limit off."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not math.isfinite(value) or value < 0:
                raise SettingsError(f"{f.metadata['env']} must be 0 or more, not {value}")
