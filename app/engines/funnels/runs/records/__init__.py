"""Records: the funnel reports a person reads, per version and per node, computed from the steps,
runs, outbox effects and delivery events (``reports.py``)."""
