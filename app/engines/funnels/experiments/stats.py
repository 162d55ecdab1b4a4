"""The statistics of an experiment's verdict, pure and on the standard library only.

- a proportion's interval: the Wilson score interval (it stays inside [0, 1] and behaves with
  few conversions, where the normal approximation does not);
- two proportions compared by the two-proportion z-test with a pooled standard error, two-sided
  p-value from ``math.erfc``;
- among several branches: the best observed rate against every other branch, each test at
  ``alpha / (k - 1)`` (Bonferroni), and no verdict before every branch has ``min_sample``
  entrants. Why this and not a Bayesian probability to be best: docs/funnel-experiments.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal


def z_for(confidence: float) -> float:
    """The two-sided critical value of the standard normal (1.959964 for 0.95)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``successes / trials`` (``(0, 1)`` without trials)."""
    if trials <= 0:
        return 0.0, 1.0
    z = z_for(confidence)
    p = successes / trials
    z2 = z * z
    denominator = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denominator
    # At the edges the bound is exactly 0 or 1; floating point would land a hair inside it.
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= trials else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True, slots=True)
class ZTest:
    z: float
    p_value: float
    """Two-sided."""


def two_proportion_z(x1: int, n1: int, x2: int, n2: int) -> ZTest | None:
    """Whether ``x1/n1`` and ``x2/n2`` differ: pooled two-proportion z-test. ``None`` when it
    cannot be computed (an empty group, or no variance: all or none converted in both)."""
    if n1 <= 0 or n2 <= 0:
        return None
    pooled = (x1 + x2) / (n1 + n2)
    variance = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    if variance <= 0:
        return None
    z = (x1 / n1 - x2 / n2) / math.sqrt(variance)
    return ZTest(z=z, p_value=math.erfc(abs(z) / math.sqrt(2)))


def lift(treated_rate: float | None, control_rate: float | None) -> float | None:
    """Relative lift of the treated rate over the control rate (``None`` when undefined)."""
    if treated_rate is None or control_rate is None or control_rate == 0:
        return None
    return (treated_rate - control_rate) / control_rate


VerdictState = Literal["collecting", "inconclusive", "winner"]


@dataclass(frozen=True, slots=True)
class Verdict:
    state: VerdictState
    """``collecting`` (a branch lacks its minimum sample), ``inconclusive`` (enough entrants, no
    significant difference yet) or ``winner``."""
    best: str | None
    """The branch with the highest observed rate (also before a verdict)."""
    winner: str | None
    alpha: float
    """The significance level each comparison was held to (Bonferroni-corrected)."""
    p_values: dict[str, float | None]
    """Best branch against each other branch."""
    message: str


def verdict(groups: dict[str, tuple[int, int]], *, min_sample: int, confidence: float) -> Verdict:
    """The verdict over branches ``name -> (converted, entered)``."""
    alpha_total = 1 - confidence
    k = len(groups)
    alpha = alpha_total / max(1, k - 1)
    rates = {name: (x / n if n else -1.0) for name, (x, n) in groups.items()}
    best = max(rates, key=lambda name: (rates[name], name)) if groups else None
    short = sorted(name for name, (_, n) in groups.items() if n < min_sample)
    if best is None or k < 2:
        return Verdict("collecting", best, None, alpha, {}, "an experiment needs two branches")
    if short:
        return Verdict(
            "collecting",
            best,
            None,
            alpha,
            {},
            f"waiting for {min_sample} entrants in every branch (short: {', '.join(short)})",
        )
    bx, bn = groups[best]
    p_values: dict[str, float | None] = {}
    for name, (x, n) in groups.items():
        if name == best:
            continue
        test = two_proportion_z(bx, bn, x, n)
        p_values[name] = None if test is None else test.p_value
    significant = all(
        p is not None and p < alpha and rates[best] > rates[name] for name, p in p_values.items()
    )
    if significant:
        return Verdict(
            "winner",
            best,
            best,
            alpha,
            p_values,
            f"'{best}' converts better than every other branch (each p < {alpha:.4g})",
        )
    return Verdict(
        "inconclusive",
        best,
        None,
        alpha,
        p_values,
        f"no branch is better than the others at {confidence:.0%} confidence yet",
    )
