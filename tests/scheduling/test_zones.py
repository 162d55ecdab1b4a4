"""One daylight-saving policy for every engine: a time inside a spring-forward gap moves forward by
the gap's length, a repeated time is its first occurrence, an unknown zone reads as UTC. Ad-rule
timetables and funnel waits and triggers agree on the instant of one wall-clock time."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo

from app.engines.adrules.due import next_slot
from app.engines.adrules.schemas import WeeklyGrid
from app.engines.funnels.runs.due.times import duration_end
from app.scheduling.zones import is_known_zone, local_to_utc, zone_or_utc

BERLIN = ZoneInfo("Europe/Berlin")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")  # moves its clocks by 30 minutes


def test_a_time_in_the_gap_moves_forward_by_the_gap() -> None:
    # Berlin skips 02:00-03:00 on 2026-03-29: 02:30 is 03:30 summer time.
    assert local_to_utc(date(2026, 3, 29), time(2, 30), BERLIN) == datetime(
        2026, 3, 29, 1, 30, tzinfo=UTC
    )
    # Lord Howe skips 02:00-02:30 on 2026-10-04: 02:15 is 02:45 summer time, not 03:15.
    moved = local_to_utc(date(2026, 10, 4), time(2, 15), LORD_HOWE)
    assert moved.astimezone(LORD_HOWE).time() == time(2, 45)


def test_a_repeated_time_is_its_first_occurrence() -> None:
    # Berlin repeats 02:00-03:00 on 2026-10-25; the first 02:30 is still summer time (+02:00).
    assert local_to_utc(date(2026, 10, 25), time(2, 30), BERLIN) == datetime(
        2026, 10, 25, 0, 30, tzinfo=UTC
    )


def test_an_unknown_or_empty_zone_reads_as_utc() -> None:
    assert zone_or_utc("Mars/Olympus_Mons") == ZoneInfo("UTC")
    assert zone_or_utc(None) == ZoneInfo("UTC")
    assert zone_or_utc("Asia/Jakarta") == ZoneInfo("Asia/Jakarta")
    assert is_known_zone("Europe/Berlin")
    assert not is_known_zone("Europe/Atlantis")
    assert not is_known_zone("../etc/passwd")


def test_ad_rules_and_funnels_agree_on_a_wall_clock_time_inside_a_gap() -> None:
    """A timetable slot at 02:15 and a funnel wait "until 02:15" on the Lord Howe night that skips
    02:00-02:30 land on the same instant."""
    slot = next_slot(WeeklyGrid(sun=["02:15"]), datetime(2026, 10, 3, 0, 0, tzinfo=UTC), LORD_HOWE)
    saturday_noon = datetime(2026, 10, 3, 12, 0, tzinfo=LORD_HOWE).astimezone(UTC)
    wait = duration_end(saturday_noon, LORD_HOWE, days=1, hours=0, minutes=0, hour=2, minute=15)
    assert slot == wait
    assert slot.astimezone(LORD_HOWE).time() == time(2, 45)
