"""Composition root: the engines plugged into a runtime, each with its dependencies built once.
The only module that knows all engines besides the web layer."""

from __future__ import annotations

from datetime import timedelta

from app.clock import Clock
from app.db.session import Database
from app.engines.adrules.claim.pool import FETCH_OUTSTANDING
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.jobs import RUN_ACCOUNT
from app.engines.adrules.plugin import PLUGIN as ADRULES
from app.engines.adrules.stops import StopCheck
from app.engines.adrules.work.account import queue_defer
from app.engines.adrules.work.sheets_values import SheetCache
from app.engines.funnels.consent import gate
from app.engines.funnels.deps import CACHE_SECONDS, FunnelsDeps
from app.engines.funnels.events.ingest import ProcessingRequests
from app.engines.funnels.events.ingest_writer import EventWriter
from app.engines.funnels.jobs import mail_domain
from app.engines.funnels.outbox.work.channel_deps import ChannelDeps
from app.engines.funnels.outbox.work.deliver import Deliverer
from app.engines.funnels.outbox.work.mail_tracking import WorkspaceTracking
from app.engines.funnels.outside.clients import ProviderClients
from app.engines.funnels.plugin import CHANNELS as FUNNEL_CHANNELS
from app.engines.funnels.plugin import EXECUTORS as FUNNEL_EXECUTORS
from app.engines.funnels.plugin import PLUGIN as FUNNELS
from app.engines.funnels.runs.work.runner import Runner
from app.engines.plugin import EnginePlugin
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.plugin import PLUGIN as RANKTRACKING
from app.integrations.http_guard import (
    NO_RETRY,
    ClientOptions,
    GuardedHttp,
    RetryPolicy,
    shared_guard,
)
from app.integrations.mail import MailSender, SmtpPool
from app.integrations.mail.sns import SnsVerifier
from app.integrations.meta.client import GraphClient
from app.integrations.meta.login import MetaApp, MetaLogin
from app.integrations.search_console import SearchConsoleClient
from app.integrations.serp import SerpClient
from app.integrations.serp.pacing import provider_pacer
from app.integrations.sheets import SheetsClient, TokenMinter
from app.runtime import Runtime, build_runtime
from app.scheduling.housekeeping import HOUSEKEEPING_SWEEPS
from app.settings import Settings
from app.ttl_cache import TtlCache

PLUGINS: list[EnginePlugin] = [ADRULES, FUNNELS, RANKTRACKING]


def meta_login(settings: Settings, graph: GraphClient) -> MetaLogin | None:
    """Facebook Login for the operator's Meta app, or None when no app is set."""
    integrations = settings.integrations
    if not (integrations.meta_app_id and integrations.meta_app_secret):
        return None
    redirect = (
        integrations.meta_oauth_redirect_url
        or f"{settings.web.public_url.rstrip('/')}/ui/adrules/meta/callback"
    )
    app = MetaApp(
        app_id=integrations.meta_app_id,
        app_secret=integrations.meta_app_secret,
        redirect_url=redirect,
        dialog_url=integrations.meta_dialog_url,
    )
    return MetaLogin(graph, app)


def assemble(
    settings: Settings, clock: Clock | None = None, *, db: Database | None = None
) -> Runtime:
    """A runtime with every engine's jobs and sweeps registered."""
    runtime = build_runtime(settings, clock, db=db)
    runtime.add_sweeps(HOUSEKEEPING_SWEEPS)
    for plugin in PLUGINS:
        runtime.add_jobs(plugin.jobs)
        runtime.add_sweeps(plugin.sweeps)
    runtime.resources.provide(AdRulesDeps, lambda: adrules_deps(runtime))
    runtime.resources.provide(RankTrackingDeps, lambda: ranktracking_deps(runtime))
    runtime.resources.provide(FunnelsDeps, lambda: funnels_deps(runtime))
    return runtime


def adrules_deps(runtime: Runtime) -> AdRulesDeps:
    """The ad-rules engine's dependencies, from the process's settings (built on first use)."""
    settings = runtime.settings
    integrations, adrules = settings.integrations, settings.adrules
    timeout = integrations.http_timeout_seconds
    stopped = runtime.platform_stopped
    graph = GraphClient(
        integrations.meta_graph_url,
        integrations.meta_graph_version,
        timeout_seconds=timeout,
        user_agent=integrations.user_agent,
        # The dispatch tick's calls (hanging ones included) and the worker's beside them.
        max_connections=FETCH_OUTSTANDING + 64,
    )
    return AdRulesDeps(
        db=runtime.db,
        queue=runtime.queue,
        clock=runtime.clock,
        secrets=runtime.secrets,
        sleep=runtime.clock.sleep,
        graph=graph,
        login=meta_login(settings, graph),
        sheets=SheetsClient(
            integrations.sheets_url,
            timeout_seconds=timeout,
            user_agent=integrations.user_agent,
            sleep=runtime.clock.sleep,
        ),
        sheet_cache=SheetCache(),
        job=RUN_ACCOUNT,
        token_minter=TokenMinter(
            adrules.google_token_url,
            now=runtime.clock.now,
            timeout_seconds=timeout,
            user_agent=integrations.user_agent,
        ),
        mail=MailSender(settings.mail),
        webhook_http=GuardedHttp(
            guard=shared_guard(runtime.resources, integrations),
            timeout=adrules.webhook_timeout_seconds,
            user_agent=integrations.user_agent,
            policy=RetryPolicy(attempts=2, backoff_seconds=1.0),
            clock=runtime.clock,
        ),
        public_url=settings.web.public_url,
        stopped=stopped,
        stop=StopCheck(runtime.db, stopped),
        fetch_deadline_seconds=adrules.fetch_deadline_seconds,
        fetch_slot_seconds=adrules.fetch_slot_seconds,
        tick_budget_seconds=adrules.tick_budget_seconds,
        insights_mode=adrules.insights_mode,
        throttle_max_wait_seconds=adrules.throttle_max_wait_seconds,
        defer=queue_defer(runtime.queue, RUN_ACCOUNT),
        max_deferrals=adrules.max_deferrals,
        budget_changes_per_hour=adrules.budget_changes_per_hour,
        sheet_copy_max_age=timedelta(minutes=adrules.sheet_copy_max_age_minutes),
    )


def ranktracking_deps(runtime: Runtime, *, serp: SerpClient | None = None) -> RankTrackingDeps:
    """The position-tracking engine's dependencies (built on first use); ``serp`` replaces the
    provider client built from the settings (tests point one at the loopback simulator)."""
    return RankTrackingDeps(
        db=runtime.db,
        queue=runtime.queue,
        clock=runtime.clock,
        secrets=runtime.secrets,
        settings=runtime.settings,
        serp=serp
        or SerpClient.from_settings(
            runtime.settings.integrations,
            pacer=provider_pacer(
                runtime.settings.ranktracking.provider_calls_per_minute,
                runtime.clock,
                redis_url=runtime.settings.queue.redis_url,
                timeout_seconds=runtime.settings.queue.redis_timeout_seconds,
            ),
        ),
        alert_http=GuardedHttp(
            guard=shared_guard(runtime.resources, runtime.settings.integrations),
            timeout=runtime.settings.integrations.http_timeout_seconds,
            user_agent=runtime.settings.integrations.user_agent,
            policy=NO_RETRY,
            clock=runtime.clock,
        ),
        search_console=SearchConsoleClient(
            runtime.settings.integrations.search_console_url,
            timeout_seconds=runtime.settings.integrations.http_timeout_seconds,
            user_agent=runtime.settings.integrations.user_agent,
            sleep=runtime.clock.sleep,
        ),
        # The operator's one Google token endpoint (also the ad rules' Sheets reads).
        google_tokens=TokenMinter(
            runtime.settings.adrules.google_token_url,
            now=runtime.clock.now,
            timeout_seconds=runtime.settings.integrations.http_timeout_seconds,
            user_agent=runtime.settings.integrations.user_agent,
        ),
    )


def funnels_deps(runtime: Runtime) -> FunnelsDeps:
    """The funnels engine's dependencies (built on first use): the runner over the plugin's node
    executors, the deliverer over its channels, each channel built once from the process's
    parts."""
    settings = runtime.settings
    guard = shared_guard(runtime.resources, settings.integrations)
    tracking = WorkspaceTracking(
        runtime.db, runtime.secrets, settings.web.public_url, runtime.clock
    )
    channels = ChannelDeps(
        db=runtime.db,
        secrets=runtime.secrets,
        clock=runtime.clock,
        mail=settings.mail,
        guard=guard,
        clients=ProviderClients(
            runtime.clock, guard, ClientOptions.from_settings(settings.integrations)
        ),
        smtp=SmtpPool(settings.mail, settings.funnels.deliver_in_flight, runtime.clock),
        team_mail=MailSender(settings.mail),
        tracking=tracking,
    )
    senders = {name: build(channels) for name, build in FUNNEL_CHANNELS.items()}
    return FunnelsDeps(
        db=runtime.db,
        queue=runtime.queue,
        clock=runtime.clock,
        secrets=runtime.secrets,
        settings=settings,
        runner=Runner(
            runtime.db,
            settings.funnels,
            mail_domain=mail_domain(settings.mail),
            executors=FUNNEL_EXECUTORS,
        ),
        deliverer=Deliverer(
            runtime.db,
            settings.funnels,
            senders.get,
            lease_seconds=settings.funnels.lease_seconds,
            clock=runtime.clock,
            address_key=gate.address_key(runtime.secrets),
        ),
        channels=channels,
        trial_mail=MailSender(settings.mail),
        sns=SnsVerifier(
            url_pattern=settings.mail.sns_url_pattern,
            user_agent=settings.integrations.user_agent,
            clock=runtime.clock,
        ),
        event_writer=EventWriter(
            runtime.db,
            window_seconds=settings.funnels.ingest_window_ms / 1000,
            max_rows=settings.funnels.ingest_batch_rows,
            max_batches=1
            if runtime.db.dialect == "sqlite"
            else settings.funnels.ingest_batches_in_flight,
        ),
        processing=ProcessingRequests(runtime.queue, runtime.clock),
        ingest_tokens=TtlCache(runtime.clock, CACHE_SECONDS),
        workspace_secrets=TtlCache(runtime.clock, CACHE_SECONDS),
        provider_secrets=TtlCache(runtime.clock, CACHE_SECONDS),
    )
