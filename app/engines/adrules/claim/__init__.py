"""Claim: due rules become work exactly once — the 10-second sweep claims them (advancing
``next_execution_at`` in the same transaction), fetches each active account's campaigns through
the pre-filters (reading Meta only) and queues one job per ad account with its batch record.

Nothing in this package can write to Meta (an import-linter contract, spec AR-19).
"""
