"""Prometheus metrics of the queue, the workers and the sweepers (served at ``/metrics``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

JOBS_LEASED = Counter("sweepline_jobs_leased_total", "Jobs leased by database-queue workers")
JOBS_FINISHED = Counter(
    "sweepline_jobs_finished_total", "Jobs finished, by job and outcome", ["job", "outcome"]
)
JOB_DURATION = Histogram("sweepline_job_duration_seconds", "Time spent in job handlers", ["job"])
JOBS_QUEUED = Gauge("sweepline_jobs_queued", "Jobs waiting in the queue")
JOBS_RUNNING = Gauge("sweepline_jobs_running", "Jobs leased and not finished")
JOBS_DEAD = Gauge("sweepline_jobs_dead", "Jobs that exhausted their tries")

SWEEP_DURATION = Histogram(
    "sweepline_sweep_duration_seconds", "Duration of sweeper ticks", ["sweep"]
)
SWEEP_LAG = Gauge(
    "sweepline_sweep_lag_seconds", "How late the last tick started after its due time", ["sweep"]
)
SWEEP_FAILURES = Counter("sweepline_sweep_failures_total", "Sweeper ticks that raised", ["sweep"])
SWEEP_LOOP_ERRORS = Counter(
    "sweepline_sweep_loop_errors_total",
    "Errors around ticks (claiming, renewing, recording) that the sweep loop survived",
    ["sweep"],
)
SWEEP_STALE = Gauge(
    "sweepline_sweep_stale",
    "1 when the sweep completed no tick without an error within three intervals",
    ["sweep"],
)
JOB_LEASES_LOST = Counter(
    "sweepline_job_leases_lost_total",
    "Running jobs stopped because their lease was lost (taken over or expired)",
)
WORKER_LOOP_ERRORS = Counter(
    "sweepline_worker_loop_errors_total", "Errors the database-queue worker loops survived"
)
SWEEP_TICKS = Counter("sweepline_sweep_ticks_total", "Sweeper ticks run by this process", ["sweep"])
SWEEP_DUE_LAG = Gauge(
    "sweepline_due_lag_seconds", "Now minus the oldest due item, reported by each sweep", ["sweep"]
)

OUTBOUND_CALLS = Counter(
    "sweepline_outbound_calls_total", "Calls to outside APIs", ["provider", "outcome"]
)
RUNS_LEASED = Counter("sweepline_runs_leased_total", "Engine runs leased", ["engine"])
