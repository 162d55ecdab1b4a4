"""FN-55: the experiment statistics against values computed by hand and published ones (Wilson
intervals from Newcombe 1998, table I; the z-test worked out step by step below)."""

from __future__ import annotations

import math

import pytest

from app.engines.funnels.experiments import stats


def test_fn55_wilson_interval_matches_newcombe_1998() -> None:
    """Newcombe (1998), Statistics in Medicine 17:857, table I, method 3 (score, no continuity
    correction): 81/263 → 0.2553–0.3662, 15/148 → 0.0624–0.1605, 0/20 → 0–0.1611,
    1/29 → 0.0061–0.1718."""
    for (x, n), (low, high) in {
        (81, 263): (0.2553, 0.3662),
        (15, 148): (0.0624, 0.1605),
        (0, 20): (0.0, 0.1611),
        (1, 29): (0.0061, 0.1718),
    }.items():
        got = stats.wilson_interval(x, n, 0.95)
        assert got[0] == pytest.approx(low, abs=5e-5)
        assert got[1] == pytest.approx(high, abs=5e-5)


def test_fn55_wilson_by_hand_and_empty_group() -> None:
    """20/100 at 95 %: z² = 3.841459, centre (0.2 + 0.019207) / 1.038415 = 0.211099,
    half 1.959964 · √(0.0016 + 0.000096036) / 1.038415 = 0.077732 → 0.133367–0.288831."""
    low, high = stats.wilson_interval(20, 100)
    assert low == pytest.approx(0.133367, abs=2e-6)
    assert high == pytest.approx(0.288831, abs=2e-6)
    assert stats.wilson_interval(0, 0) == (0.0, 1.0)


def test_fn55_wilson_bounds_are_exact_when_none_or_all_converted() -> None:
    """All converted: the upper bound is 1, not a hair under it (0.9999999999999999 at some
    sizes); none converted: the lower bound is 0."""
    for trials in range(1, 1001):
        assert stats.wilson_interval(trials, trials)[1] == 1.0, trials
        assert stats.wilson_interval(0, trials)[0] == 0.0, trials


def test_fn55_two_proportion_z_test_by_hand() -> None:
    """20/100 against 10/100: pooled p = 0.15, se = √(0.15 · 0.85 · 0.02) = 0.0504975,
    z = 0.1 / 0.0504975 = 1.98030, two-sided p = erfc(1.98030 / √2) = 0.047670."""
    test = stats.two_proportion_z(20, 100, 10, 100)
    assert test is not None
    assert test.z == pytest.approx(1.98030, abs=1e-5)
    assert test.p_value == pytest.approx(0.047670, abs=1e-5)
    # symmetric, and undefined without variance or without entrants
    other = stats.two_proportion_z(10, 100, 20, 100)
    assert other is not None
    assert other.z == pytest.approx(-test.z)
    assert other.p_value == pytest.approx(test.p_value)
    assert stats.two_proportion_z(0, 50, 0, 50) is None
    assert stats.two_proportion_z(1, 0, 1, 10) is None


def test_fn55_critical_value_and_lift() -> None:
    assert stats.z_for(0.95) == pytest.approx(1.959964, abs=1e-6)
    assert math.erfc(stats.z_for(0.95) / math.sqrt(2)) == pytest.approx(0.05)
    assert stats.lift(0.12, 0.10) == pytest.approx(0.2)
    assert stats.lift(0.1, 0.0) is None
    assert stats.lift(None, 0.1) is None


def test_fn55_no_verdict_before_the_minimum_sample() -> None:
    v = stats.verdict({"a": (50, 99), "b": (5, 100)}, min_sample=100, confidence=0.95)
    assert v.state == "collecting"
    assert v.winner is None
    assert "a" in v.message


def test_fn55_verdict_winner_and_inconclusive() -> None:
    """Two branches: the best against the other at alpha 0.05 (p = 0.04767 < 0.05 → winner);
    three branches: Bonferroni alpha 0.025, the same p is not enough."""
    v = stats.verdict({"a": (10, 100), "b": (20, 100)}, min_sample=100, confidence=0.95)
    assert (v.state, v.winner, v.best) == ("winner", "b", "b")
    assert v.p_values["a"] == pytest.approx(0.047670, abs=1e-5)
    three = stats.verdict(
        {"a": (10, 100), "b": (20, 100), "c": (10, 100)}, min_sample=100, confidence=0.95
    )
    assert three.alpha == pytest.approx(0.025)
    assert (three.state, three.winner, three.best) == ("inconclusive", None, "b")
