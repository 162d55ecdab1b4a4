"""The events pipeline: what happens to a contact, stored first, then matched to funnels.

    ingest.py, ingest_writer.py (due)
              every inbound event (API calls, hosted forms, the site snippet, tracking pixels and
              links, booking and payment webhooks, delivery reports) is one row, answered at once
    due/      date_triggers.py, schedule_triggers.py: the time triggers, occurrences claimed once
              by inserting their row
    ingest.py (claim, work)
              leases stored events and turns each into a contact event (work/inbound.py one by
              one, work/apply_set.py set-wise; delivery reports through records/)
    claim/    triggers.py: leases unmatched contact events, wakes runs waiting on them, starts
              runs whose trigger matches (work/segment_triggers.py for ``segment_enter``)
    work/     inbound.py, apply_set.py, segment_triggers.py
    records/  delivery_reports.py, report_nonces.py: what providers reported about our messages

``models.py`` holds the tables; ``forms.py``, ``site_snippet.py``, ``tracking.py`` and ``sources/``
the public surface events come in through (hosted forms, the snippet, signed pixels, links and
tokens, the payment and booking providers' webhooks).
"""
