"""The outbox pipeline: side effects committed with the run that caused them, sent after commit.

    (due)     a node's effect row, with ``next_attempt_at`` and ``not_before`` (quiet hours)
    deliver.py (claim, work, records)
              leases due effects, re-checks the contact at send time, applies the frequency cap
              (frequency.py), hands the effect to its channel (e-mail here, the outside channels in
              ``funnels/outside/channels.py``) and records the delivery event
    render.py, unsubscribe.py, mail_tracking.py
              what a message carries when it goes: merge variables, unsubscribe links and
              headers, tracked links signed with the workspace's secret

``payloads.py`` is the contract between the two sides: one typed struct per channel.
``cancel.py`` cancels effects not yet delivered; ``preferences.py`` records the choice a contact
makes through an unsubscribe link.
"""
