"""What a contact import's report keeps of a refused row: its number, the field and why, with
the row's own values masked. The report outlives the upload (whose text is emptied when the job
ends), so it must not be where an erased person's address or name survives (FN-33)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.scheduling.bulk import ItemError

_QUOTED_MIN = 3
"""Shorter cell values are left (a digit, ``no``): masking them would garble the message."""


def masked(problem: ItemError, values: Iterable[str]) -> ItemError:
    """The refusal as stored in the job's report: the row's own values (an address, a name, a
    bad time zone) masked, since the report outlives the upload and names no one (FN-33). The
    row number and the field say which cell to fix."""
    message = problem.message
    for value in sorted({v.strip() for v in values}, key=len, reverse=True):
        if len(value) >= _QUOTED_MIN:
            message = re.sub(re.escape(value), "…", message, flags=re.IGNORECASE)
    return ItemError(problem.item, problem.field, message)
