"""Typed settings, loaded from the environment by :func:`load_settings`.

Every field carries the name of its environment variable and a docstring
(:mod:`app.settings_fields`); ``python -m app env`` prints the full table
(:mod:`app.settings_docs`; the README's table is generated from it). The HTTP service's groups
are :mod:`app.settings_web`. Nothing is built at import time:
callers pass the mapping they want read, which keeps tests free of global state.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from importlib.metadata import PackageNotFoundError, version

from app.settings_fields import SettingsError, env, load_group
from app.settings_web import RateLimitSettings, SecuritySettings, WebSettings

try:
    _VERSION = version("sweepline")
except PackageNotFoundError:  # running from a source tree that was never installed
    _VERSION = "0"

DEFAULT_USER_AGENT = f"Sweepline/{_VERSION}"
"""The ``User-Agent`` of outbound requests unless ``OUTBOUND_USER_AGENT`` says otherwise."""

MIN_REDIS_TIMEOUT_SECONDS = 0.1  # below a loaded machine's round trip: every command would fail
MAX_REDIS_TIMEOUT_SECONDS = 60.0  # a request waiting longer for the queue is a hang, not a timeout

DATABASE_URL_SCHEMES = ("sqlite+aiosqlite:", "postgresql+asyncpg:")
"""The drivers the engines are built for (:mod:`app.db.engine`)."""


@dataclass(frozen=True, slots=True)
class DatabaseSettings:
    url: str = env("DATABASE_URL", "sqlite+aiosqlite:///var/sweepline.db")
    """SQLAlchemy URL. ``sqlite+aiosqlite:///path`` (embedded default) or
    ``postgresql+asyncpg://user@host/db`` (server mode)."""
    pool_size: int = env("DATABASE_POOL_SIZE", 10)
    """Connections each process keeps open to PostgreSQL, and as many again at a busy moment; a
    worker holds up to six of them for one-statement writes (the queue's leases, the senders'
    outcome records). Ignored on SQLite."""
    busy_timeout_ms: int = env("SQLITE_BUSY_TIMEOUT_MS", 5000)
    """How long a SQLite writer waits for the write lock before failing (requests and jobs)."""
    claim_busy_timeout_ms: int = env("SQLITE_CLAIM_BUSY_TIMEOUT_MS", 2000)
    """How long a sweep tick's or a lease upkeep's SQLite write waits for the write lock: the
    next tick or round tries again (app/db/session_kinds.py)."""
    lock_timeout_ms: int = env("DATABASE_LOCK_TIMEOUT_MS", 5000)
    """PostgreSQL ``lock_timeout`` of requests and jobs: how long one waits for a row lock
    before it fails as a lock timeout (retried, a 503 with Retry-After in a request)."""
    claim_lock_timeout_ms: int = env("DATABASE_CLAIM_LOCK_TIMEOUT_MS", 1000)
    """PostgreSQL ``lock_timeout`` of sweep ticks and the queue's lease upkeep (renewal,
    recovery of expired leases): a stalled holder's row lock makes them give up and go on."""
    idle_in_transaction_timeout_ms: int = env("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS", 60000)
    """PostgreSQL ``idle_in_transaction_session_timeout``: a session that sits this long inside
    a transaction (a frozen process) is ended, its locks freed and its leases left to expire.
    Keep it above OUTBOUND_HTTP_TIMEOUT: work may wait for an outside call inside a transaction."""
    echo: bool = env("DATABASE_ECHO", False)
    """Log every SQL statement (development only)."""

    def __post_init__(self) -> None:
        for name in (
            "busy_timeout_ms",
            "claim_busy_timeout_ms",
            "lock_timeout_ms",
            "claim_lock_timeout_ms",
            "idle_in_transaction_timeout_ms",
        ):
            if getattr(self, name) < 0:
                variable = self.__dataclass_fields__[name].metadata["env"]
                raise SettingsError(f"{variable} cannot be negative")
        if not self.url.startswith(DATABASE_URL_SCHEMES):
            # Only the scheme is repeated: the rest of a URL can hold a password.
            scheme, sep, _ = self.url.partition("://")
            given = f", not {scheme!r}" if sep else ""
            raise SettingsError(
                "DATABASE_URL must start with sqlite+aiosqlite:/// (a file) or "
                f"postgresql+asyncpg:// (a server){given}"
            )

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")


@dataclass(frozen=True, slots=True)
class QueueSettings:
    redis_url: str = env("REDIS_URL", "")
    """When set, jobs go through arq on this Redis; otherwise the durable database queue is used."""
    arq_queue_name: str = env("ARQ_QUEUE_NAME", "sweepline:queue")
    """Redis key of the arq queue (give each deployment or test run its own); the rate limits'
    buckets are kept under it too."""
    redis_timeout_seconds: float = env("REDIS_TIMEOUT_SECONDS", 2.0)
    """Longest a connection to Redis, or one command on it, may take before it fails (0.1 to
    60 s), tried once: while Redis is down or not answering, a request that queues a job answers
    503 (``queue_unavailable``) within this time, and workers wait for Redis and carry on when it
    is back (the workers' commands are bounded by a ping every half of this time instead of one
    timeout each: a frozen Redis is noticed within 1.5 times this)."""
    concurrency: int = env("WORKER_CONCURRENCY", 16)
    """Jobs a worker process runs at the same time."""
    lease_loops: int = env("JOB_LEASE_LOOPS", 4)
    """Database-queue leasing loops per process, sharing WORKER_CONCURRENCY: one leases from the
    database while another starts and completes its jobs."""
    lease_seconds: int = env("JOB_LEASE_SECONDS", 30)
    """A running job's lease (database queue and arq alike), renewed by its worker's heartbeat
    every third of it while the job runs: a job whose worker died (or stopped renewing) runs again
    elsewhere this long after the last renewal, whatever its own timeout, and a job that lost its
    lease stops before its next outside call."""
    poll_interval: float = env("JOB_POLL_INTERVAL", 0.5)
    """Seconds an idle database-queue worker waits before looking for jobs again."""
    batch_size: int = env("JOB_LEASE_BATCH", 200)
    """Database jobs leased per statement."""
    prefetch: int = env("JOB_PREFETCH", 16)
    """Database jobs a process leases ahead of its free slots and keeps in memory (their leases
    renewed), so a freed slot starts the next job without a round trip; 0 turns it off."""
    shutdown_grace_seconds: float = env("SHUTDOWN_GRACE_SECONDS", 20.0)
    """On SIGTERM, in-flight jobs get this long to finish before they are released."""
    done_retention_hours: int = env("JOB_DONE_RETENTION_HOURS", 24)
    """Finished jobs are kept this long so a repeated job id is still deduplicated."""

    def __post_init__(self) -> None:
        if not MIN_REDIS_TIMEOUT_SECONDS <= self.redis_timeout_seconds <= MAX_REDIS_TIMEOUT_SECONDS:
            raise SettingsError(
                f"REDIS_TIMEOUT_SECONDS must be between {MIN_REDIS_TIMEOUT_SECONDS:g} and "
                f"{MAX_REDIS_TIMEOUT_SECONDS:g} seconds, not {self.redis_timeout_seconds:g}"
            )

    @property
    def uses_redis(self) -> bool:
        return bool(self.redis_url)


@dataclass(frozen=True, slots=True)
class BulkSettings:
    chunk_items: int = env("BULK_CHUNK_ITEMS", 200)
    """Most items (CSV rows, contacts) a bulk job applies per transaction."""
    chunk_seconds: float = env("BULK_CHUNK_SECONDS", 0.2)
    """How long one chunk's transaction should take: the chunk size adapts (down to 10 items,
    up to BULK_CHUNK_ITEMS) so a busy or slow machine still holds the SQLite write lock only
    this long at a time."""
    max_import_rows: int = env("BULK_MAX_IMPORT_ROWS", 100_000)
    """Rows one CSV import may hold; a larger file is refused (422) before anything is written."""


@dataclass(frozen=True, slots=True)
class ProcessSettings:
    heap_freeze: bool = env("HEAP_FREEZE", True)
    """``serve`` and ``worker`` leave what is alive once started out of later garbage collections
    (``gc.freeze``: full collections under load then walk only what was made since); off, the
    collector walks the whole heap as Python's default does."""


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    otlp_endpoint: str = env("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    """Base URL of an OpenTelemetry collector (``http://collector:4318``): ``serve`` and
    ``worker`` then export traces to it over OTLP/HTTP (protobuf, at ``/v1/traces``) — one trace
    per request or sweep tick, through the jobs it queues to their outside calls. Empty: no
    tracing, at no cost. The SDK reads the other ``OTEL_*`` variables itself (e.g.
    ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_TRACES_SAMPLER``)."""
    service_name: str = env("OTEL_SERVICE_NAME", "sweepline")
    """The ``service.name`` the exported traces carry."""


@dataclass(frozen=True, slots=True)
class SweeperSettings:
    enabled: bool = env("SWEEPERS_ENABLED", True)
    """Run the periodic sweepers in ``serve`` (turn off for API-only replicas)."""
    stop_all: bool = env("PLATFORM_STOP", False)
    """Platform-wide stop: every sweep returns at once and nothing new is dispatched."""
    tick_lease_seconds: int = env("SWEEP_LEASE_SECONDS", 15)
    """A tick's claim, renewed every third of it while the tick runs: a tick whose process died
    is taken over by another process this long after its last renewal. Keep it longer than the
    10-second interval, so a killed 10-second tick is never run twice."""


@dataclass(frozen=True, slots=True)
class MailSettings:
    smtp_host: str = env("SMTP_HOST", "127.0.0.1")
    """SMTP server for outgoing mail."""
    smtp_port: int = env("SMTP_PORT", 8025)
    """SMTP port."""
    smtp_username: str = env("SMTP_USERNAME", "")
    """SMTP user name (empty: no authentication)."""
    smtp_password: str = env("SMTP_PASSWORD", "")
    """SMTP password."""
    smtp_starttls: bool = env("SMTP_STARTTLS", False)
    """Upgrade the SMTP connection with STARTTLS."""
    from_address: str = env("MAIL_FROM", "sweepline@localhost")
    """Sender address of outgoing mail."""
    timeout_seconds: float = env("SMTP_TIMEOUT", 10.0)
    """Timeout of one SMTP conversation."""
    unsubscribe_address: str = env("MAIL_UNSUBSCRIBE_ADDRESS", "")
    """The mailto: target of List-Unsubscribe (empty: unsubscribe@ the MAIL_FROM domain). Mail
    that arrives there is to be relayed, raw, to POST /u/mail."""

    sns_url_pattern: str = env(
        "SES_SNS_URL_PATTERN", r"^https://sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/"
    )
    """Where Amazon SNS signing certificates and subscription confirmations may be fetched from
    (a regular expression on the URL; anything else in a message is refused)."""

    @property
    def unsubscribe_mailbox(self) -> str:
        domain = self.from_address.rpartition("@")[2] or "localhost"
        return self.unsubscribe_address or f"unsubscribe@{domain}"


@dataclass(frozen=True, slots=True)
class IntegrationSettings:
    meta_graph_url: str = env("META_GRAPH_URL", "https://graph.facebook.com")
    """Base URL of the Meta Graph API (the sandbox simulator's URL in tests and the demo)."""
    meta_graph_version: str = env("META_GRAPH_VERSION", "v21.0")
    """Graph API version in request paths."""
    meta_app_id: str = env("META_APP_ID", "")
    """The Meta app's id: "Connect with Facebook" and the check of every saved token (Meta's
    ``debug_token`` with the app's access token) need it and ``META_APP_SECRET``."""
    meta_app_secret: str = env("META_APP_SECRET", "")
    """The Meta app's secret (App settings > Basic). Never sent to a browser."""
    meta_dialog_url: str = env("META_DIALOG_URL", "https://www.facebook.com")
    """Base URL of Facebook Login's dialog (the sandbox simulator's URL in tests and the demo)."""
    meta_oauth_redirect_url: str = env("META_OAUTH_REDIRECT_URL", "")
    """Where Facebook Login sends the person back; it must be listed in the app's Valid OAuth
    Redirect URIs. Empty: ``PUBLIC_URL`` + ``/ui/adrules/meta/callback``."""
    sheets_url: str = env("SHEETS_URL", "https://sheets.googleapis.com")
    """Base URL of the Google Sheets API v4."""
    search_console_url: str = env("SEARCH_CONSOLE_URL", "https://www.googleapis.com")
    """Base URL of the Google Search Console API (``/webmasters/v3``), where position tracking
    imports a property's search queries as keywords."""
    serp_url: str = env("SERP_URL", "https://api.dataforseo.com")
    """Base URL of the SERP provider (DataForSEO-shaped queued API)."""
    serp_login: str = env("SERP_LOGIN", "")
    """SERP provider login (HTTP basic auth)."""
    serp_password: str = env("SERP_PASSWORD", "")
    """SERP provider password."""
    http_timeout_seconds: float = env("OUTBOUND_HTTP_TIMEOUT", 30.0)
    """Timeout of one outbound HTTP request."""
    http_max_connections: int = env("OUTBOUND_HTTP_MAX_CONNECTIONS", 100)
    """Connections one outside API's client keeps open at most."""
    allow_private_targets: bool = env("OUTBOUND_ALLOW_PRIVATE", False)
    """Let URLs that users and workspaces set (provider base URLs, webhooks, ``http_request``)
    reach private, loopback and link-local addresses. Off in production; the tests and the demo
    turn it on for their loopback simulators. Cloud metadata addresses stay refused."""
    user_agent: str = env("OUTBOUND_USER_AGENT", DEFAULT_USER_AGENT)
    """``User-Agent`` of every outbound request (providers ask for one that names the caller,
    and a receiver can tell the product's calls apart by it)."""

    def __post_init__(self) -> None:
        agent = self.user_agent
        if not agent.strip() or not agent.isprintable() or not agent.isascii():
            raise SettingsError(
                f"OUTBOUND_USER_AGENT must be printable ASCII on one line, not {agent!r}"
            )


@dataclass(frozen=True, slots=True)
class FunnelSettings:
    runner_tasks: int = env("FUNNEL_RUNNER_TASKS", 4)
    """Runner jobs started per 10-second tick; each leases and executes due runs in batches."""
    runner_batch: int = env("FUNNEL_RUNNER_BATCH", 200)
    """Runs leased per statement and committed per transaction (a savepoint per run)."""
    lease_seconds: int = env("FUNNEL_LEASE_SECONDS", 120)
    """A leased run not advanced within this time is due again (its worker is presumed dead)."""
    drain_seconds: float = env("FUNNEL_DRAIN_SECONDS", 9.0)
    """How long one runner or deliverer job keeps leasing before it hands over to the next tick."""
    deliver_batch: int = env("FUNNEL_DELIVER_BATCH", 50)
    """Outbox effects leased per statement by the deliverer."""
    deliver_tasks: int = env("FUNNEL_DELIVER_TASKS", 2)
    """Deliverer jobs started per 10-second tick."""
    deliver_in_flight: int = env("FUNNEL_DELIVER_IN_FLIGHT", 8)
    """Messages one worker process's deliverers have on the wire at once (one persistent SMTP
    connection each); each one's outcome is committed before its slot sends another, so a killed
    process sends at most this many again."""
    max_send_attempts: int = env("FUNNEL_MAX_SEND_ATTEMPTS", 8)
    """Transient delivery failures are retried (with backoff) up to this many attempts."""
    retry_base_seconds: int = env("FUNNEL_RETRY_BASE_SECONDS", 60)
    """First delivery retry delay; doubled on every further attempt."""
    max_steps_per_wake: int = env("FUNNEL_MAX_STEPS_PER_WAKE", 100)
    """Nodes one run may execute in one wake before it is put back (a runaway guard)."""
    campaign_in_flight: int = env("FUNNEL_CAMPAIGN_IN_FLIGHT", 8)
    """Campaign messages sent at the same time (one persistent SMTP connection each); each
    one's outcome is committed before its slot sends another, so a killed sender sends at most
    this many again."""
    ingest_window_ms: float = env("FUNNEL_INGEST_WINDOW_MS", 2.0)
    """Inbound events arriving within this many milliseconds share one insert and one commit
    (each request is answered after it); 0 stores every event in its own transaction."""
    ingest_batch_rows: int = env("FUNNEL_INGEST_BATCH_ROWS", 500)
    """Most inbound events in one shared insert (a full batch is written without waiting)."""
    ingest_batches_in_flight: int = env("FUNNEL_INGEST_BATCHES_IN_FLIGHT", 2)
    """Shared inserts written at the same time on PostgreSQL; events arriving while all are busy
    join the next (SQLite writes one at a time: it has one write lock)."""
    ai_draft_repair_rounds: int = env("FUNNEL_AI_DRAFT_REPAIR_ROUNDS", 2)
    """Drafting a funnel with AI: how many times the validator's findings go back to the model
    for a corrected answer before the draft is kept with the findings it still has."""
    ai_draft_max_tokens: int = env("FUNNEL_AI_DRAFT_MAX_TOKENS", 4000)
    """Longest answer (in tokens) one drafting round may take; reserved from the AI quota."""
    ai_draft_timeout_seconds: float = env("FUNNEL_AI_DRAFT_TIMEOUT_SECONDS", 60.0)
    """How long one drafting round waits for the AI provider before giving up."""

    def __post_init__(self) -> None:
        if not 0 <= self.ai_draft_repair_rounds <= 10:
            raise SettingsError(
                "FUNNEL_AI_DRAFT_REPAIR_ROUNDS must be between 0 and 10, "
                f"not {self.ai_draft_repair_rounds}"
            )
        if not 1 <= self.ai_draft_max_tokens <= 100_000:
            raise SettingsError(
                "FUNNEL_AI_DRAFT_MAX_TOKENS must be between 1 and 100000, "
                f"not {self.ai_draft_max_tokens}"
            )
        if self.ai_draft_timeout_seconds <= 0:
            raise SettingsError("FUNNEL_AI_DRAFT_TIMEOUT_SECONDS must be positive")


@dataclass(frozen=True, slots=True)
class RankTrackingSettings:
    eur_per_usd: Decimal = env("RT_EUR_PER_USD", Decimal("0.86"))
    """Exchange rate: EUR per 1 USD. The provider bills in USD and the balance is kept in EUR;
    every provider price and reported cost is converted with this rate (keep it current)."""
    price_serp_page_usd: Decimal = env("RT_PRICE_SERP_PAGE_USD", Decimal("0.0006"))
    """Provider price of the first SERP results page (10 results), standard queue, in USD."""
    price_serp_page_priority_usd: Decimal = env(
        "RT_PRICE_SERP_PAGE_PRIORITY_USD", Decimal("0.0012")
    )
    """Provider price of the first SERP results page on the priority queue, in USD."""
    price_extra_page_factor: Decimal = env("RT_PRICE_EXTRA_PAGE_FACTOR", Decimal("0.75"))
    """Each further page of 10 results costs this fraction of the first (depth 100 = 10 pages)."""
    mobile_factor: Decimal = env("RT_PRICE_MOBILE_FACTOR", Decimal("1"))
    """Multiplier of the SERP price for a mobile check (the provider bills both alike)."""
    price_maps_task_usd: Decimal = env("RT_PRICE_MAPS_TASK_USD", Decimal("0.0006"))
    """Provider price of one Google Maps or Local Finder SERP (one geo-grid cell), standard queue,
    in USD."""
    price_maps_task_priority_usd: Decimal = env(
        "RT_PRICE_MAPS_TASK_PRIORITY_USD", Decimal("0.0012")
    )
    """Provider price of one Google Maps or Local Finder SERP on the priority queue, in USD."""
    price_kd_task_usd: Decimal = env("RT_PRICE_KD_TASK_USD", Decimal("0.05"))
    """Provider price of one keyword-data task (up to 1,000 keywords), in USD: the standard
    (task_post / task_get) method; the live method, not used here, costs more."""
    price_kd_volume_usd: Decimal = env("RT_PRICE_KD_VOLUME_USD", Decimal("0"))
    """What the ``volume`` package adds to a keyword-data task, in USD (returned by the task)."""
    price_kd_cpc_usd: Decimal = env("RT_PRICE_KD_CPC_USD", Decimal("0"))
    """What the ``cpc`` package (CPC and competition) adds to a keyword-data task, in USD."""
    price_kd_trends_usd: Decimal = env("RT_PRICE_KD_TRENDS_USD", Decimal("0"))
    """What the ``trends`` package (monthly searches) adds to a keyword-data task, in USD."""
    dispatch_batch: int = env("RT_DISPATCH_BATCH", 500)
    """Due schedules taken by one hourly sweep."""
    dispatch_concurrency: int = env("RT_DISPATCH_CONCURRENCY", 4)
    """Admissions the hourly sweep runs at the same time (PostgreSQL; SQLite runs one)."""
    max_active_schedules: int = env("RT_MAX_ACTIVE_SCHEDULES", 30)
    """Schedules active or paused per workspace."""
    max_selection_keywords: int = env("RT_MAX_SELECTION_KEYWORDS", 200)
    """Keywords of a direct selection."""
    max_run_keywords: int = env("RT_MAX_RUN_KEYWORDS", 500)
    """Keywords one run may request (checked at creation, estimation and before each dispatch)."""
    tasks_ready_per_minute: int = env("RT_TASKS_READY_PER_MINUTE", 15)
    """``tasks_ready`` calls the shared poller makes per minute and endpoint, across every process
    (the provider allows about 20 a minute per account)."""
    provider_calls_per_minute: int = env("RT_PROVIDER_CALLS_PER_MINUTE", 2000)
    """Provider calls of every kind per minute, across every process (the account's general
    limit; shared through Redis in server mode). 0: unpaced."""
    cost_tolerance_percent: Decimal = env("RT_COST_TOLERANCE_PERCENT", Decimal("2"))
    """How far (in %, either way) the provider's billed unit price, converted at ``RT_EUR_PER_USD``,
    may differ from the price list before a settlement raises a cost-drift alarm."""
    fetch_attempts: int = env("RT_FETCH_ATTEMPTS", 5)
    """``task_get`` attempts (free) for a task the provider listed as ready before its keyword is
    counted failed: an unreadable or failed answer is retried on the next poll tick."""
    stale_after_minutes: int = env("RT_STALE_AFTER_MINUTES", 360)
    """A running child run whose tasks were posted this long ago is closed with what it has (its
    pending keywords count as missing); an active run without progress for this long is closed by
    reconciliation."""
    postbacks: bool = env("RT_POSTBACKS", False)
    """Ask the provider to POST each finished task to ``PUBLIC_URL``/hooks/ranktracking/postback/…
    (that address must be reachable from the provider); polling stays on as the fallback."""
    snapshot_retention_days: int = env("RT_SNAPSHOT_RETENTION_DAYS", 180)
    """Days a keyword's stored results page (top 100 URLs, features, AI Overview references) is
    kept to explain its movements; positions, URLs and features themselves are kept for good.
    0: snapshots are not stored."""


@dataclass(frozen=True, slots=True)
class AdRulesSettings:
    insights_mode: str = env("ADRULES_INSIGHTS_MODE", "packed")
    """How the worker reads Insights: ``packed`` (several campaigns per Graph batch call),
    ``per_campaign`` (one batch call per campaign) or ``account`` (account-level, level=campaign)."""
    throttle_max_wait_seconds: float = env("ADRULES_THROTTLE_MAX_WAIT_SECONDS", 60.0)
    """Longest wait for Meta's ``estimated_time_to_regain_access`` inside a run; a longer
    throttle puts the account's job back on the queue for when access returns."""
    max_deferrals: int = env("ADRULES_MAX_DEFERRALS", 3)
    """How many times one account's run may be put back for throttling before the campaigns
    still unread are recorded as errors."""
    google_token_url: str = env("ADRULES_GOOGLE_TOKEN_URL", "https://oauth2.googleapis.com/token")
    """Google's OAuth token endpoint, where a workspace's service-account key is exchanged for a
    Sheets access token (custom metrics)."""
    budget_changes_per_hour: int = env("ADRULES_BUDGET_CHANGES_PER_HOUR", 4)
    """Budget changes allowed per ad object per hour across all rules (Meta allows about 4); a
    further change is recorded as skipped naming the rules that made the others."""
    sheet_copy_max_age_minutes: int = env("ADRULES_SHEET_COPY_MAX_AGE_MINUTES", 1440)
    """Oldest database copy of a Google Sheet a custom metric falls back on when the live read
    fails; an older copy is refused and the record is an error naming its age."""
    webhook_timeout_seconds: float = env("ADRULES_WEBHOOK_TIMEOUT_SECONDS", 10.0)
    """Timeout of one ``notify_webhook`` call, redirects and body included (shorter than other
    outbound calls: a slow receiver holds up the account's run)."""
    fetch_deadline_seconds: float = env("ADRULES_FETCH_DEADLINE_SECONDS", 8.0)
    """Longest one ad account's campaign fetch (all pages and retries) may take inside the
    10-second dispatch sweep; a slower or hanging account is recorded as skipped for that run so
    no other rule's tick is delayed. Counted from the account's first HTTP call, never while it
    waits for a slot."""
    fetch_slot_seconds: float = env("ADRULES_FETCH_SLOT_SECONDS", 0.5)
    """A campaign-list call out longer than this gives its slot (one of 16) to the next account
    and runs on to its deadline: ad accounts that hang cannot hold the others up."""
    tick_budget_seconds: float = env("ADRULES_TICK_BUDGET_SECONDS", 8.5)
    """The dispatch sweep's fetches end within this, so a 10-second tick ends within 10 s;
    accounts not reached, or still arriving, are recorded as deferred and fetched first next tick."""

    def __post_init__(self) -> None:
        if self.budget_changes_per_hour < 1:
            raise SettingsError("ADRULES_BUDGET_CHANGES_PER_HOUR must be at least 1")
        if self.sheet_copy_max_age_minutes < 1:
            raise SettingsError("ADRULES_SHEET_COPY_MAX_AGE_MINUTES must be at least 1")
        if self.webhook_timeout_seconds <= 0:
            raise SettingsError("ADRULES_WEBHOOK_TIMEOUT_SECONDS must be positive")
        if self.fetch_deadline_seconds <= 0:
            raise SettingsError("ADRULES_FETCH_DEADLINE_SECONDS must be positive")
        if self.fetch_slot_seconds <= 0:
            raise SettingsError("ADRULES_FETCH_SLOT_SECONDS must be positive")
        if self.tick_budget_seconds <= 0:
            raise SettingsError("ADRULES_TICK_BUDGET_SECONDS must be positive")
        if self.insights_mode not in ("packed", "per_campaign", "account"):
            raise SettingsError(
                "ADRULES_INSIGHTS_MODE must be 'packed', 'per_campaign' or 'account'"
            )


@dataclass(frozen=True, slots=True)
class DemoSettings:
    enabled: bool = env("DEMO", False)
    """Seed a demo organisation, workspace and admin on start and run the sandbox simulators."""
    admin_email: str = env("DEMO_ADMIN_EMAIL", "admin@demo.local")
    """E-mail of the demo admin."""


@dataclass(frozen=True, slots=True)
class Settings:
    database: DatabaseSettings = field(default_factory=DatabaseSettings)
    queue: QueueSettings = field(default_factory=QueueSettings)
    bulk: BulkSettings = field(default_factory=BulkSettings)
    web: WebSettings = field(default_factory=WebSettings)
    process: ProcessSettings = field(default_factory=ProcessSettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    rate_limits: RateLimitSettings = field(default_factory=RateLimitSettings)
    sweepers: SweeperSettings = field(default_factory=SweeperSettings)
    mail: MailSettings = field(default_factory=MailSettings)
    integrations: IntegrationSettings = field(default_factory=IntegrationSettings)
    ranktracking: RankTrackingSettings = field(default_factory=RankTrackingSettings)
    funnels: FunnelSettings = field(default_factory=FunnelSettings)
    adrules: AdRulesSettings = field(default_factory=AdRulesSettings)
    demo: DemoSettings = field(default_factory=DemoSettings)


def load_settings(environ: Mapping[str, str]) -> Settings:
    """Build :class:`Settings` from an environment mapping (usually ``os.environ``)."""
    settings: Settings = load_group(Settings, environ)
    if settings.web.log_format not in {"text", "json"}:
        raise SettingsError(f"LOG_FORMAT must be 'text' or 'json', not {settings.web.log_format!r}")
    if settings.web.log_level.upper() not in logging.getLevelNamesMapping():
        raise SettingsError(
            f"LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, "
            f"not {settings.web.log_level!r}"
        )
    if not settings.web.public_url:
        host = settings.web.host
        host = "127.0.0.1" if host in {"", "0.0.0.0", "::"} else host  # noqa: S104
        host = f"[{host}]" if ":" in host else host
        web = dataclasses.replace(settings.web, public_url=f"http://{host}:{settings.web.port}")
        settings = dataclasses.replace(settings, web=web)
    return settings
