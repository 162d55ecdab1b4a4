"""Keyword lists: normalised, de-duplicated, bulk add reporting what it skipped, imports."""

from __future__ import annotations

import pytest

from app.engines.ranktracking.keywords import normalise, parse_import
from app.engines.ranktracking.lists import add_keywords, detail_out, remove_keywords, rename_list
from app.engines.ranktracking.models import KeywordList
from app.errors import Conflict, ValidationFailed
from app.runtime import Runtime
from tests.engines.ranktracking.factories import make_list
from tests.factories import Tenant


def test_rt3_normalise_trims_casefolds_and_collapses() -> None:
    assert normalise("  Running\t  SHOES ") == "running shoes"
    assert normalise("Straße") == "strasse"


def test_import_text_and_csv() -> None:
    assert parse_import("a\n\n b \nc\n") == ["a", " b ", "c"]
    assert parse_import('keyword,volume\n"red, shoes",10\nblue,3\n', fmt="csv") == [
        "red, shoes",
        "blue",
    ]
    # A bare carriage return ends a row; other line separators are part of a field.
    assert parse_import("a\rb\x85c\r\nd", fmt="csv") == ["a", "b\x85c", "d"]
    with pytest.raises(ValidationFailed, match="could not be read"):
        parse_import("x" * 200_000, fmt="csv")


async def test_bulk_add_skips_existing_and_reports(runtime: Runtime, tenant: Tenant) -> None:
    kl = await make_list(runtime, tenant, ["Red shoes", "blue shoes", "red  shoes"])
    other = await make_list(runtime, tenant, [], name="Other")
    async with runtime.db.write() as uow:
        row = await uow.session.get(KeywordList, kl.id)
        assert row is not None
        report = await add_keywords(
            uow.session,
            row,
            ["BLUE shoes", "green shoes", "green shoes", ""],
            now=runtime.clock.now(),
        )
        assert report.added == ["green shoes"]
        assert report.skipped_existing == ["blue shoes"]
        assert report.skipped_duplicates == ["green shoes"]
        assert report.keyword_count == 3
        removed = await remove_keywords(
            uow.session, row, ["RED SHOES", "unknown"], now=runtime.clock.now()
        )
        assert (removed.removed, removed.keyword_count) == (1, 2)
        detail = await detail_out(uow.session, row)
        assert detail.keywords == ["blue shoes", "green shoes"]
        with pytest.raises(Conflict):
            await rename_list(uow.session, row, "other", runtime.clock.now())
        assert other.id != row.id
