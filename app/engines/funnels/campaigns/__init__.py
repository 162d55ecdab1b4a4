"""Campaigns (broadcasts): an audience materialised once, a schedule, a rate limit and a
crash-safe, resumable send (FN-28 to FN-30).

    service.py  (due)     a scheduled campaign: create, edit, schedule, cancel
    audience.py (due)     its audience snapshot, claimed once, numbered, taken in bounded chunks
    jobs.py     (claim)   due campaigns get a sender job; a sender whose lease expired, a new one
    send.py     (work)    one sender holds the campaign's lease and walks the recipients in order
    service.py  (records) counters recomputed from the delivery events in ``models.py``
"""
