"""The 10-second dispatch sweep as the scheduler runs it: build the dispatcher's dependencies from
the job context (the shared Graph client, the queue, the clock's sleep, the platform stop) and
dispatch what is due."""

from __future__ import annotations

import logging
from datetime import datetime

from app.engines.adrules.claim.dispatch import DispatchDeps, dispatch_due
from app.engines.adrules.jobs import RUN_ACCOUNT
from app.integrations.meta.client import GraphClient
from app.integrations.meta.reader import MetaReader
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import EVERY_10_SECONDS, Sweep

log = logging.getLogger(__name__)

GRAPH_RESOURCE = "meta.graph"
"""Key of the process's shared Graph client (the worker uses the same one)."""


def shared_graph(ctx: JobContext) -> GraphClient:
    integrations = ctx.settings.integrations
    return ctx.resources.get(
        GRAPH_RESOURCE,
        lambda: GraphClient(
            integrations.meta_graph_url,
            integrations.meta_graph_version,
            timeout_seconds=integrations.http_timeout_seconds,
        ),
    )


def deps_from_context(ctx: JobContext) -> DispatchDeps:
    graph = shared_graph(ctx)
    return DispatchDeps(
        db=ctx.db,
        queue=ctx.queue,
        secrets=ctx.secrets,
        reader_for=lambda token: MetaReader(graph, token),
        job=RUN_ACCOUNT,
        sleep=ctx.clock.sleep,
        stopped=lambda: ctx.settings.sweepers.stop_all,
        fetch_deadline_seconds=ctx.settings.adrules.fetch_deadline_seconds,
    )


async def dispatch_tick(ctx: JobContext, tick: datetime) -> None:
    summary = await dispatch_due(deps_from_context(ctx), tick, ctx.clock.now)
    if summary.rules:
        log.info(
            "ad rules dispatched",
            extra={
                "rules": summary.rules,
                "jobs": summary.jobs,
                "skipped_accounts": summary.skipped_accounts,
            },
        )


DISPATCH_SWEEP = Sweep(name="adrules.dispatch", schedule=EVERY_10_SECONDS, run=dispatch_tick)
