"""Average position and the visibility score of one measured run.

Visibility is the share of the clicks the tracked site would get if it ranked first for every
measured keyword, weighting each position by an organic click-through rate::

    visibility = 100 × Σ ctr(position_k) / (N × ctr(1))

over the N keywords the run measured (retrieved; "no data" and failed keywords are left out). A
keyword not found within the depth, or ranked below 20, counts ctr = 0. The rates below are the
published averages of organic desktop CTR by position (AWR/Backlinko 2023 studies, rounded); they
only need to fall with the position, the score is a relative measure between runs.

Average position is the mean over the keywords that ranked within the depth; the number of those
keywords is reported beside it, since a keyword dropping out raises nothing in the mean.
"""

from __future__ import annotations

CTR_BY_POSITION: dict[int, float] = {
    1: 27.6,
    2: 15.8,
    3: 11.0,
    4: 8.4,
    5: 6.3,
    6: 4.9,
    7: 3.9,
    8: 3.3,
    9: 2.7,
    10: 2.4,
    **{p: 1.0 for p in range(11, 16)},
    **{p: 0.5 for p in range(16, 21)},
}
"""Click-through rate in percent by organic position (positions beyond 20 get 0)."""
