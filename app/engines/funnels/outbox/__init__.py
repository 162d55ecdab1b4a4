"""The outbox pipeline: side effects committed with the run that caused them, sent after commit.

    due/      an effect row is due when ``pending`` and its ``next_attempt_at`` has come (written
              by the runner; ``not_before`` for quiet hours); ``retry.py``: when a failed try is
              due again; ``cancel.py``: effects taken out of what is due
    claim/    lease.py: due effects leased in batches, exactly once, and which are still ours
    work/     deliver.py: the deliverer re-checks the contact at send time (the consent gate),
              applies the frequency cap (frequency.py) and hands the effect to its channel (e-mail
              in email.py, the outside channels in ``funnels/outside/channels.py``); what a
              message carries when it goes: render.py (merge variables), unsubscribe.py
              (unsubscribe links and headers), mail_tracking.py (tracked links signed with the
              workspace's secret)
    records/  outcomes.py: each outcome and its delivery event; preferences.py: the choice a
              contact makes through an unsubscribe link

``payloads.py`` is the contract between the two sides: one typed struct per channel;
``channel.py`` what a channel is handed (the leased effect) and the errors it may raise;
``states.py`` the effect's states and the moves between them.
"""
