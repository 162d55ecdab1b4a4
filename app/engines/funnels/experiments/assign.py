"""Deterministic assignment per contact: a hash of the experiment (funnel and split node) and the
contact, so a contact who re-enters, or whose run re-executes the split after a crash, lands in
the same branch; and the same for the holdout, per funnel."""

from __future__ import annotations

import hashlib

from app.engines.funnels.definitions.graph import Split

HOLDOUT_SCALE = 10_000
"""The holdout's percent is compared in hundredths of a percent."""


def _point(key: str, modulus: int) -> int:
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:8], "big") % modulus


def experiment_branch(funnel_id: int, node: Split, contact_id: int) -> str:
    """The weighted branch of ``node`` this contact belongs to, the same every time."""
    total = sum(b.weight for b in node.branches)
    point = _point(f"experiment:{funnel_id}:{node.id}:{contact_id}", total)
    for branch in node.branches:
        if point < branch.weight:
            return branch.name
        point -= branch.weight
    return node.branches[-1].name


def held_out(funnel_id: int, contact_id: int, percent: float) -> bool:
    """Whether this contact is in the funnel's control share (``percent`` of contacts)."""
    threshold = round(percent * HOLDOUT_SCALE / 100)
    return _point(f"holdout:{funnel_id}:{contact_id}", HOLDOUT_SCALE) < threshold
