"""The Position tracking engine's queue jobs and sweeps, as the process registers them.

Each job's spec stays beside its handler (a thin wrapper over a function tests call directly)
because the stage before it queues that spec: the claim's hand-off queues ``POST_JOB``, a run's
end queues ``EVALUATE_JOB``, the evaluation ``DELIVER_JOB``. This module is where they are
gathered; :mod:`app.engines.ranktracking.plugin` plugs :data:`JOBS` and :data:`SWEEPS` into the
process.

- jobs: post a run's tasks (default and priority queue), the pause notice, a keyword import's
  chunks, the alert evaluation and delivery, the e-mail report;
- sweeps: dispatch (hourly at :20), the poller (every 10 s), reconciliation, due reports, the
  location list, the snapshot retention and the geo-grids' collection (every 10 s).
"""

from __future__ import annotations

from typing import Any

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
from app.scheduling.jobs import JobSpec
from app.scheduling.sweeper import Sweep

JOBS: list[JobSpec[Any]] = [
    POST_JOB,
    POST_PRIORITY_JOB,
    PAUSE_NOTICE_JOB,
    KEYWORDS_IMPORT_JOB,
    EVALUATE_JOB,
    DELIVER_JOB,
    REPORT_JOB,
]

SWEEPS: list[Sweep] = [
    DISPATCH_SWEEP,
    POLL_SWEEP,
    RECONCILE_SWEEP,
    REPORT_SWEEP,
    LOCATIONS_SWEEP,
    SNAPSHOT_RETENTION_SWEEP,
    GEOGRID_SWEEP,
]
