"""Campaigns (broadcasts): an audience materialised once, a schedule, a rate limit and a
crash-safe, resumable send (FN-28 to FN-30).

    service.py  a scheduled campaign: create, edit, schedule, cancel; delivery reports stored
    due/        audience.py: its audience snapshot, claimed once, numbered, taken in bounded
                chunks; campaigns.py: the sweep's reads (due campaigns, campaigns without a live
                sender); recipients.py: the next pending recipients of one campaign
    claim/      lease.py: one sender at a time holds a campaign's lease
    work/       sender.py walks the recipients in order (compose.py the messages, transport.py
                the SMTP connections); trial.py the composer's preview and test send
    records/    outcomes.py: each recipient's outcome and the checkpoint, committed as they come;
                counters.py: the counters recomputed from them and the delivery events
    jobs.py     due campaigns get a sender job; a sender whose lease expired, a new one

``models.py`` holds the tables, ``states.py`` and ``recipient_states.py`` their states, and
``review.py`` what a campaign would send if it started now.
"""
