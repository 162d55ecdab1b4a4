"""Keyword normalisation and import parsing (pure functions).

A keyword is stored trimmed, case-folded and with inner whitespace collapsed (RT-3), so
"  Running  Shoes" and "running shoes" are the same member.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass

from app.errors import ValidationFailed

MAX_KEYWORD_LENGTH = 200


def normalise(keyword: str) -> str:
    """Trim, case-fold and collapse whitespace."""
    return " ".join(keyword.split()).casefold()


@dataclass(frozen=True, slots=True)
class Normalised:
    keywords: list[str]
    """Distinct normalised keywords, in first-seen order."""
    duplicates: list[str]
    """Inputs that repeated an earlier keyword once normalised."""
    invalid: list[str]
    """Inputs that were empty or too long."""


def normalise_all(raw: Iterable[str]) -> Normalised:
    seen: set[str] = set()
    keywords: list[str] = []
    duplicates: list[str] = []
    invalid: list[str] = []
    for item in raw:
        kw = normalise(item)
        if not kw or len(kw) > MAX_KEYWORD_LENGTH:
            if item.strip():
                invalid.append(item)
            continue
        if kw in seen:
            duplicates.append(kw)
            continue
        seen.add(kw)
        keywords.append(kw)
    return Normalised(keywords, duplicates, invalid)


def parse_import(text: str, *, fmt: str = "text") -> list[str]:
    """Keywords from an import: ``text`` is one keyword a line; ``csv`` takes the first column and
    skips a header row named ``keyword``."""
    if fmt == "text":
        return [line for line in text.splitlines() if line.strip()]
    # newline="": a bare carriage return ends a row as the CSV module expects (without it, the
    # reader refuses one inside a line: "new-line character seen in unquoted field").
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:  # a field over the reader's size limit
        raise ValidationFailed(f"the CSV could not be read: {exc}") from None
    out = [row[0] for row in rows if row and row[0].strip()]
    if out and normalise(out[0]) in {"keyword", "keywords"}:
        out = out[1:]
    return out
