"""The run pipeline: a contact's way through a funnel, one row per run, by stage.

    due/      a run is created with its ``wake_at`` (``entry.py``; ``entry_gate.py``: re-entry at
              most once per N days; ``enrolment.py``: many contacts in bounded chunks); waits move
              it (``times.py`` computes when); ``goals.py`` makes a sleeping run that met a goal
              due at that goal
    claim/    ``lease.py``: due runs leased through the shared claim primitive, and the fence a
              leased batch passes before its work
    work/     ``runner.py`` executes leased runs through the node executors (``nodes/``: flow
              decisions, contact changes, outbox effects) and writes each batch's steps, effects
              and advances at once (``batch_writes.py``); ``context.py`` holds the values a run
              produced; ``effect_failures.py`` is what a run does when an effect cannot go out
    records/  ``reports.py``: what a person reads, per-version and per-node reports of steps and
              runs

``states.py`` declares a run's states and the moves between them.
"""
