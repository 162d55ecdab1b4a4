"""Approve before acting (spec AR-28).

propose.py    the account job's hook: a planned change is stored as a proposal, not written
links.py      the signed, expiring approval link a digest carries
decide.py     approve (claimed once, then carried out) and reject
carry_out.py  an approved change re-read, re-planned, guarded and written as a live run writes
expire.py     the sweep that records proposals whose window ended as expired
"""
