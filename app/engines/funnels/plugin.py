"""The Funnels engine as the process sees it: its plug-in registries, built here explicitly, and
its jobs and sweeps.

- :data:`EXECUTORS` — node kind → executor: the flow nodes, this release's actions, then the
  actions that reach outside (their ``notify_team``, to members only, replaces the basic one).
- :data:`CHANNELS` — outbox channel → the factory of its sender: ``email`` and the outside
  channels (sms, push, letter, team, http, payment, booking, ai).

Both are handed to the runner and the deliverer when the composition root builds the engine's
dependencies (:class:`~app.engines.funnels.deps.FunnelsDeps`, :func:`app.wiring.funnels_deps`);
the definitions read :data:`EXECUTORS` to tell what this server can execute and to simulate.
Nothing fills a registry by being imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from app.engines.funnels.campaigns import jobs as campaign_jobs
from app.engines.funnels.contacts import segment_sweep
from app.engines.funnels.contacts.csv_import import CONTACTS_IMPORT_JOB
from app.engines.funnels.events.due import schedule_triggers
from app.engines.funnels.experiments import jobs as experiment_jobs
from app.engines.funnels.jobs import JOBS, SWEEPS
from app.engines.funnels.outbox.work.channel_deps import ChannelFactory, email_channel
from app.engines.funnels.outside import channels as outside_channels
from app.engines.funnels.outside import executors as outside_executors
from app.engines.funnels.runs.due.enrolment import ENROLMENT_JOB
from app.engines.funnels.runs.work.nodes import Executors, actions, flow
from app.engines.plugin import EnginePlugin

EXECUTORS: Executors = MappingProxyType(
    {**flow.EXECUTORS, **actions.EXECUTORS, **outside_executors.EXECUTORS}
)
CHANNELS: Mapping[str, ChannelFactory] = MappingProxyType(
    {"email": email_channel, **outside_channels.factories()}
)

PLUGIN = EnginePlugin(
    name="funnels",
    title="Funnels",
    jobs=[
        *JOBS,
        *schedule_triggers.JOBS,
        *campaign_jobs.JOBS,
        CONTACTS_IMPORT_JOB,
        ENROLMENT_JOB,
    ],
    sweeps=[
        *SWEEPS,
        *schedule_triggers.SWEEPS,
        *campaign_jobs.SWEEPS,
        *experiment_jobs.SWEEPS,
        *segment_sweep.SWEEPS,
    ],
)
