"""Counts in sentences: ``1 keyword``, ``2 keywords`` — never ``keyword(s)``."""

from __future__ import annotations


def counted(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"
