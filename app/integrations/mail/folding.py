"""How structured headers are written on the wire: plain ASCII, as given, folded only after the
commas between items (see :mod:`app.integrations.mail.wire` for why)."""

from __future__ import annotations

from app.integrations.mail.errors import PermanentMailError

TEXT_HEADERS = frozenset({"subject", "from", "to", "cc", "bcc", "reply-to", "sender"})
"""Written by the ``email`` package: they may carry words that need RFC 2047 encoding."""
SOFT_LIMIT = 78
"""RFC 5322 §2.1.1: lines SHOULD be no longer (folding stops here where it can)."""
HARD_LIMIT = 998
"""RFC 5322 §2.1.1: lines MUST be no longer (excluding CRLF)."""


def is_structured(name: str) -> bool:
    """Whether ``name`` is written verbatim here rather than by the ``email`` package."""
    lowered = name.lower()
    return not (
        lowered in TEXT_HEADERS or lowered.startswith("content-") or lowered == "mime-version"
    )


def fold_structured(name: str, value: str, linesep: str = "\r\n") -> str:
    """``name: value`` as plain ASCII, folded only after the commas between items, where the
    line would pass :data:`SOFT_LIMIT`.

    Raises:
        PermanentMailError: the value is not ASCII, or an item cannot fit on a line of
            :data:`HARD_LIMIT` octets (the message cannot be written correctly).
    """
    unfolded = " ".join(str(value).split())  # a value handed in folded is refolded here
    if not unfolded.isascii():
        raise PermanentMailError(f"the {name} header must be ASCII: {unfolded[:80]!r}")
    items = unfolded.split(", ")
    lines = [f"{name}: {items[0]}"]
    for item in items[1:]:
        candidate = f"{lines[-1]}, {item}"
        if len(candidate) <= SOFT_LIMIT:
            lines[-1] = candidate
        else:
            lines[-1] += ","
            lines.append(f" {item}")
    if any(len(line) > HARD_LIMIT for line in lines):
        raise PermanentMailError(f"the {name} header has an item longer than {HARD_LIMIT} octets")
    return linesep.join(lines) + linesep
