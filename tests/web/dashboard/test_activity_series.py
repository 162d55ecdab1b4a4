"""The charts' hourly buckets: every hour of the window present (empty hours as 0), rows summed
into the hour that holds them, rows outside the window left out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.web.dashboard.activity import HOUR, axis, chart, count_into


def test_rows_are_summed_into_the_hour_holding_them() -> None:
    start = datetime(2026, 3, 1, 10, 30, tzinfo=UTC)
    buckets = axis(start, start + timedelta(hours=3), HOUR)
    assert [b.hour for b in buckets] == [10, 11, 12, 13]
    rows = [
        (datetime(2026, 3, 1, 10, 59, tzinfo=UTC), 2),
        (datetime(2026, 3, 1, 11, 0, tzinfo=UTC), 1),
        (datetime(2026, 3, 1, 13, 10, tzinfo=UTC), 4),
        (datetime(2026, 3, 1, 9, 59, tzinfo=UTC), 100),
        (datetime(2026, 3, 1, 14, 0, tzinfo=UTC), 100),
    ]
    values = count_into(buckets, HOUR, rows)
    assert values == [2, 1, 0, 4]
    spec = chart(buckets, [("sent", values, "#000")], y_label="messages")
    assert spec["x"][1] - spec["x"][0] == 3600
    assert spec["total"] == 7
    assert spec["series"] == [{"label": "sent", "values": [2, 1, 0, 4], "color": "#000"}]
