"""Funnels engine: contacts walk versioned graphs; every side effect goes out through an outbox.

Five pipelines, each a package, each the same four stages (due → claim → work → records)::

    events/     inbound row ─ ingest (claim) ─▶ contact event ─ triggers (claim) ─▶ run entry
                date_triggers, schedule_triggers: occurrences claimed once by their row
    runs/       run row + wake_at (entry, due) ─ runner (claim) ─▶ nodes/ (work) ─▶ steps
                     │                                            └─ effects ─┐
    outbox/     effect row + next_attempt_at ─ deliver (claim) ─▶ channel (work) ─▶ delivery events
    campaigns/  audience snapshot (service) ─ jobs (claim) ─▶ send (work) ─▶ campaign events

``consent/`` is the one gate every sender asks at send time (consent, suppression, erased
addresses, quiet hours, the frequency cap). ``contacts/`` (who they are, what describes them, deletion and import) and ``definitions/``
(graphs, validation, versions, simulation) are what the pipelines read; ``outside/`` holds the
actions that reach outside (their executors for the runs, their channels for the outbox).
``plugin.py`` builds the registries (node executors, outbox channels); ``deps.py`` is what the
engine needs from the process (the runner and the deliverer over those registries, the SMTP pool,
the provider clients, the public receivers' caches), built once by ``app/wiring.py``;
``models.py``, ``schemas.py``, ``errors.py`` and ``jobs.py`` stay here.
"""
