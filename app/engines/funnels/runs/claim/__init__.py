"""Claim: due runs leased exactly once through the shared claim primitive, and the fence a leased
batch passes before its work (``lease.py``)."""
