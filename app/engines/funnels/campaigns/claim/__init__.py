"""Claim: a campaign's sending lease (``lease.py``), held by one sender at a time and renewed
with each of its checkpoints."""
