"""Work: a leased effect delivered against the outside world. ``deliver.py`` (the deliverer:
send-time consent and frequency-cap checks, then the channel) with its pure deciders in
``outcomes.py``, ``recorded_slots.py`` (send slots that deliver only after their previous outcome's commit,
preparing the next message meanwhile), the
``email`` channel (``email.py``, composed with ``render.py``, ``unsubscribe.py`` and
``mail_tracking.py``), ``frequency.py`` (the cap's counts) and ``channel_deps.py`` (what the
channels are built from)."""
