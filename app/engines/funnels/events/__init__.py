"""The events pipeline: what happens to a contact, stored first, then matched to funnels.

    ingest.py, ingest_writer.py (due)
              every inbound event (API calls, hosted forms, the site snippet, tracking pixels and
              links, booking and payment webhooks, delivery reports) is one row, answered at once
    ingest.py (claim, work)
              leases stored events and turns each into a contact event (delivery reports through
              delivery_reports.py)
    triggers.py (claim, work)
              leases unmatched contact events: wakes runs waiting on them, starts runs whose
              trigger matches (segment_triggers.py for ``segment_enter``)
    date_triggers.py, schedule_triggers.py
              the time triggers: occurrences claimed once by inserting their row

``models.py`` holds the tables; ``forms.py``, ``site_snippet.py``, ``tracking.py`` and ``sources/``
the public surface events come in through (hosted forms, the snippet, signed pixels, links and
tokens, the payment and booking providers' webhooks).
"""
