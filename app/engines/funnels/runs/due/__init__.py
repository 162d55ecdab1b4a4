"""Due: a run is due at its ``wake_at``. Entering a funnel writes it (``entry.py``, with
``entry_gate.py`` for re-entry at most once per N days and ``enrolment.py`` for many contacts in
chunks), waits and quiet hours compute it (``times.py``), and the goal sweep (``goals.py``) makes a
sleeping run due at once at the goal its contact met."""
