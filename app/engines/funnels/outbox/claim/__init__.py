"""Claim: due effects leased in batches, exactly once (``lease.py``, on the shared claim
primitive of :mod:`app.scheduling.claim`), and the read of which of a batch are still ours at
send time."""
