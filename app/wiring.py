"""Composition root: the engines plugged into a runtime, each with its dependencies built once.
The only module that knows all engines besides the web layer."""

from __future__ import annotations

from datetime import timedelta

from app.clock import Clock
from app.db.session import Database
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.jobs import RUN_ACCOUNT
from app.engines.adrules.plugin import PLUGIN as ADRULES
from app.engines.adrules.stops import StopCheck
from app.engines.adrules.work.account import queue_defer
from app.engines.adrules.work.sheets_values import SheetCache
from app.engines.funnels.plugin import PLUGIN as FUNNELS
from app.engines.plugin import EnginePlugin
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.plugin import PLUGIN as RANKTRACKING
from app.integrations.http_guard import NO_RETRY, GuardedHttp, RetryPolicy, shared_guard
from app.integrations.mail import MailSender
from app.integrations.meta.client import GraphClient
from app.integrations.serp import SerpClient
from app.integrations.sheets import SheetsClient, TokenMinter
from app.runtime import Runtime, build_runtime
from app.scheduling.housekeeping import HOUSEKEEPING_SWEEPS
from app.settings import Settings

PLUGINS: list[EnginePlugin] = [ADRULES, FUNNELS, RANKTRACKING]


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
    return runtime


def adrules_deps(runtime: Runtime) -> AdRulesDeps:
    """The ad-rules engine's dependencies, from the process's settings (built on first use)."""
    settings = runtime.settings
    integrations, adrules = settings.integrations, settings.adrules
    timeout = integrations.http_timeout_seconds
    stopped = runtime.platform_stopped
    return AdRulesDeps(
        db=runtime.db,
        queue=runtime.queue,
        clock=runtime.clock,
        secrets=runtime.secrets,
        sleep=runtime.clock.sleep,
        graph=GraphClient(
            integrations.meta_graph_url, integrations.meta_graph_version, timeout_seconds=timeout
        ),
        sheets=SheetsClient(
            integrations.sheets_url, timeout_seconds=timeout, sleep=runtime.clock.sleep
        ),
        sheet_cache=SheetCache(),
        job=RUN_ACCOUNT,
        token_minter=TokenMinter(
            adrules.google_token_url, now=runtime.clock.now, timeout_seconds=timeout
        ),
        mail=MailSender(settings.mail),
        webhook_http=GuardedHttp(
            guard=shared_guard(runtime.resources, integrations),
            timeout=adrules.webhook_timeout_seconds,
            policy=RetryPolicy(attempts=2, backoff_seconds=1.0),
            clock=runtime.clock,
        ),
        stopped=stopped,
        stop=StopCheck(runtime.db, stopped),
        fetch_deadline_seconds=adrules.fetch_deadline_seconds,
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
        serp=serp or SerpClient.from_settings(runtime.settings.integrations),
        alert_http=GuardedHttp(
            guard=shared_guard(runtime.resources, runtime.settings.integrations),
            timeout=10.0,
            policy=NO_RETRY,
            clock=runtime.clock,
        ),
    )
