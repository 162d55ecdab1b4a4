"""Money units of position tracking: integer micro-euros, and how they are shown.

Balances, reservations, settlements and ledger entries are integers of 1/1,000,000 EUR, so that
sub-cent prices (a SERP page costs 0.0006 USD) add up exactly on every database. Rounding to the
cent happens only here, for display: a cost is shown rounded up (it never looks cheaper than it
is), an available balance rounded down (it never looks larger than it is).
"""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

MICROS_PER_EUR = 1_000_000
MICROS_PER_CENT = 10_000


def cents_to_micros(cents: int) -> int:
    return cents * MICROS_PER_CENT


def exact_eur(micros: int) -> str:
    """The exact amount, six decimals: ``4650`` → ``"0.004650"``."""
    return f"{Decimal(micros).scaleb(-6):.6f}"


def _cents(micros: int, rounding: str) -> Decimal:
    return (Decimal(micros) / MICROS_PER_CENT).to_integral_value(rounding=rounding) / 100


def eur_up(micros: int) -> str:
    """A cost for display, rounded up to the cent: ``4650`` → ``"0.01"``."""
    return f"{_cents(micros, ROUND_CEILING):.2f}"


def eur_down(micros: int) -> str:
    """A balance for display, rounded down to the cent."""
    return f"{_cents(micros, ROUND_FLOOR):.2f}"
