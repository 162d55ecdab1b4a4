"""The Funnels engine's jobs and sweeps, as registered with the process."""

from __future__ import annotations

from app.engines.funnels.campaigns import jobs as campaign_jobs
from app.engines.funnels.contacts.csv_import import CONTACTS_IMPORT_JOB
from app.engines.funnels.events import schedule_triggers
from app.engines.funnels.jobs import JOBS, SWEEPS
from app.engines.funnels.outside.channels import install as install_outside_channels
from app.engines.funnels.runs.enrolment import ENROLMENT_JOB
from app.engines.plugin import EnginePlugin

install_outside_channels()

PLUGIN = EnginePlugin(
    name="funnels",
    title="Funnels",
    jobs=[*JOBS, *schedule_triggers.JOBS, *campaign_jobs.JOBS, CONTACTS_IMPORT_JOB, ENROLMENT_JOB],
    sweeps=[*SWEEPS, *schedule_triggers.SWEEPS, *campaign_jobs.SWEEPS],
)
