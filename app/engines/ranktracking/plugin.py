"""The Position tracking engine's jobs and sweeps, as registered with the process."""

from __future__ import annotations

from app.engines.plugin import EnginePlugin
from app.engines.ranktracking.alerts.deliver import DELIVER_JOB
from app.engines.ranktracking.alerts.evaluate import EVALUATE_JOB
from app.engines.ranktracking.alerts.report import REPORT_JOB, REPORT_SWEEP
from app.engines.ranktracking.claim.dispatch import DISPATCH_SWEEP
from app.engines.ranktracking.explain.retention import SNAPSHOT_RETENTION_SWEEP
from app.engines.ranktracking.keyword_import import KEYWORDS_IMPORT_JOB
from app.engines.ranktracking.local.collect import GEOGRID_SWEEP
from app.engines.ranktracking.location_sync import LOCATIONS_SWEEP
from app.engines.ranktracking.work.notices import PAUSE_NOTICE_JOB
from app.engines.ranktracking.work.poller import POLL_SWEEP
from app.engines.ranktracking.work.reconcile import RECONCILE_SWEEP
from app.engines.ranktracking.work.runs import POST_JOB, POST_PRIORITY_JOB

PLUGIN = EnginePlugin(
    name="ranktracking",
    title="Position tracking",
    jobs=[
        POST_JOB,
        POST_PRIORITY_JOB,
        PAUSE_NOTICE_JOB,
        KEYWORDS_IMPORT_JOB,
        EVALUATE_JOB,
        DELIVER_JOB,
        REPORT_JOB,
    ],
    sweeps=[
        DISPATCH_SWEEP,
        POLL_SWEEP,
        RECONCILE_SWEEP,
        REPORT_SWEEP,
        LOCATIONS_SWEEP,
        SNAPSHOT_RETENTION_SWEEP,
        GEOGRID_SWEEP,
    ],
)
