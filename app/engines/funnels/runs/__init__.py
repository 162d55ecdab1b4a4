"""The run pipeline: a contact's way through a funnel, one row per run.

    entry.py  (due)     a run is created with its ``wake_at`` (entry_gate.py: re-entry at most once
                        per N days; enrolment.py: many contacts in bounded chunks); waits move it
                        (due.py computes when)
    runner.py (claim)   leases due runs through the shared claim primitive, executes them
    nodes/    (work)    the node executors: flow decisions, contact changes, outbox effects
    records.py          what a person reads: per-version and per-node reports of steps and runs

``context.py`` holds the values a run produced (for conditions and merge variables),
``goals.py`` the sweep that moves sleeping runs to a goal they met and ``effect_failures.py`` what
a run does when one of its effects cannot go out.
"""
