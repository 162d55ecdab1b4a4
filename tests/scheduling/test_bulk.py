"""The bulk-job runner's chunk sizing: chunks adapt to take about BULK_CHUNK_SECONDS, so a slow
or busy machine holds the write lock no longer than a fast one."""

from __future__ import annotations

from app.scheduling.bulk import MIN_CHUNK_ITEMS, next_chunk_size


def test_a_slow_chunk_makes_the_next_one_smaller_and_a_fast_one_larger() -> None:
    assert next_chunk_size(200, 0.8, target=0.2, most=200) == 50
    assert next_chunk_size(50, 0.05, target=0.2, most=200) == 100  # at most double
    assert next_chunk_size(100, 0.0, target=0.2, most=200) == 200
    assert next_chunk_size(200, 0.01, target=0.2, most=200) == 200  # never above the setting
    assert next_chunk_size(20, 30.0, target=0.2, most=200) == MIN_CHUNK_ITEMS
    assert next_chunk_size(5, 30.0, target=0.2, most=5) == 5
