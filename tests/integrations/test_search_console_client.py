"""The Search Console client against the loopback simulator (RT-68): properties, queries read
page by page with ``startRow``, the service account's token minted for the Search Console scope
by the Sheets minter, and every failure an error that says what happened."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, date, datetime

import pytest

from app.integrations.search_console import SCOPE, SearchConsoleClient, SearchConsoleError
from app.integrations.sheets import ServiceAccount, TokenMinter
from app.sandbox.base import simulator_in_loop
from app.sandbox.search_console import QueryRow, SearchConsoleSandbox
from app.sandbox.sheets import SheetsSandbox

SITE = "https://www.acme-shop.com/"
DOMAIN_SITE = "sc-domain:acme-shop.com"
ACCOUNT = "keywords@acme-shop.iam.gserviceaccount.com"
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


async def _no_wait(_: float) -> None:
    return None


class Google:
    def __init__(self, console: SearchConsoleSandbox, minter: TokenMinter, key: str) -> None:
        self.console, self.minter, self.key = console, minter, key

    def client(self, **kwargs: object) -> SearchConsoleClient:
        options: dict[str, object] = {"retry_delays": (0.0,), "sleep": _no_wait, "page_rows": 100}
        options.update(kwargs)
        return SearchConsoleClient(self.console.url, **options)  # type: ignore[arg-type]

    def account(self, key: str | None = None) -> ServiceAccount:
        return ServiceAccount(key or self.key, self.minter, scope=SCOPE)


@pytest.fixture
async def google() -> AsyncIterator[Google]:
    tokens = SheetsSandbox(api_keys=set(), bearer_tokens=set())
    console = SearchConsoleSandbox(google=tokens)
    async with simulator_in_loop(tokens) as token_url, simulator_in_loop(console):
        minter = TokenMinter(f"{token_url}/token", now=lambda: NOW)
        yield Google(console, minter, tokens.new_service_account(ACCOUNT))
        await minter.aclose()


def _rows(n: int, day: str = "2026-02-10") -> list[QueryRow]:
    return [QueryRow(f"query {i:04d}", day, 5000 - i, 10_000 - i, 1 + i / 100) for i in range(n)]


async def test_rt68_lists_the_properties_the_service_account_can_read(google: Google) -> None:
    google.console.add_property(SITE)
    google.console.add_property(DOMAIN_SITE, "siteFullUser")
    client = google.client()
    try:
        sites = await client.sites(google.account())
    finally:
        await client.aclose()
    assert [(p.site_url, p.permission_level) for p in sites] == [
        (SITE, "siteOwner"),
        (DOMAIN_SITE, "siteFullUser"),
    ]
    assert google.console.google.minted == 1  # one token, minted for Search Console's scope
    assert "webmasters" in next(iter(google.console.google.token_scopes.values()))


async def test_rt68_reads_every_query_page_by_page_with_start_row(google: Google) -> None:
    google.console.add_property(DOMAIN_SITE)
    google.console.add_rows(DOMAIN_SITE, _rows(250))
    google.console.add_rows(DOMAIN_SITE, _rows(3, day="2026-01-01"))  # outside the range
    client = google.client()
    try:
        rows = await client.queries(
            DOMAIN_SITE, start=date(2026, 2, 1), end=date(2026, 2, 28), credentials=google.account()
        )
    finally:
        await client.aclose()
    assert len(rows) == 250
    assert [r.keys[0] for r in rows] == [f"query {i:04d}" for i in range(250)]  # by clicks
    assert (rows[7].clicks, rows[7].impressions, rows[7].position) == (4993, 9993, 1.07)
    assert rows[7].ctr == pytest.approx(4993 / 9993)
    # 100 + 100 + 50: the short third page ends the read; each page asked from its first row.
    starts = [d["site"] for k, d in google.console.state.log if k == "searchanalytics.query"]
    assert starts == [DOMAIN_SITE] * 3
    assert google.console.count("searchanalytics.query") == 3


async def test_rt68_an_exact_multiple_of_the_page_ends_on_an_answer_without_rows(
    google: Google,
) -> None:
    google.console.add_property(SITE)
    google.console.add_rows(SITE, _rows(200))
    client = google.client()
    try:
        rows = await client.queries(
            SITE, start=date(2026, 2, 1), end=date(2026, 2, 28), credentials=google.account()
        )
        capped = await client.queries(
            SITE,
            start=date(2026, 2, 1),
            end=date(2026, 2, 28),
            credentials=google.account(),
            max_rows=150,
        )
    finally:
        await client.aclose()
    assert len(rows) == 200
    assert [r.keys[0] for r in capped] == [r.keys[0] for r in rows[:150]]
    assert google.console.count("searchanalytics.query") == 3 + 2


async def test_rt68_fresh_days_only_with_data_state_all(google: Google) -> None:
    google.console.add_property(SITE)
    google.console.add_rows(SITE, [QueryRow("old", "2026-02-20", 3, 30, 2.0)])
    google.console.add_rows(SITE, [QueryRow("fresh", "2026-03-01", 9, 90, 1.0, fresh=True)])
    client = google.client()
    try:
        final = await client.queries(
            SITE, start=date(2026, 2, 1), end=date(2026, 3, 1), credentials=google.account()
        )
        everything = await client.queries(
            SITE,
            start=date(2026, 2, 1),
            end=date(2026, 3, 1),
            credentials=google.account(),
            data_state="all",
        )
    finally:
        await client.aclose()
    assert [r.keys[0] for r in final] == ["old"]
    assert [r.keys[0] for r in everything] == ["fresh", "old"]


async def test_rt68_a_key_google_does_not_know_is_refused_by_the_token_endpoint(
    google: Google,
) -> None:
    google.console.add_property(SITE)
    stranger = SheetsSandbox().new_service_account("stranger@elsewhere.iam.gserviceaccount.com")
    client = google.client()
    try:
        with pytest.raises(SearchConsoleError) as refused:
            await client.sites(google.account(stranger))
    finally:
        await client.aclose()
    assert refused.value.status == 400
    assert "invalid_grant" in refused.value.message
    assert google.console.count("sites.list") == 0  # never reached the API without a token


async def test_rt68_a_property_not_shared_with_the_account_is_a_403(google: Google) -> None:
    client = google.client()
    try:
        with pytest.raises(SearchConsoleError) as refused:
            await client.queries(
                SITE, start=date(2026, 2, 1), end=date(2026, 2, 2), credentials=google.account()
            )
    finally:
        await client.aclose()
    assert refused.value.status == 403
    assert "PERMISSION_DENIED" in refused.value.message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"<html>Bad gateway</html>", "unexpected shape"),
        (b'{"rows": [{"keys": "red shoes", "clicks": 1}]}', "unexpected shape"),
        (
            b'{"rows": [{"keys": [], "clicks": 1, "impressions": 2, "ctr": 0.5, "position": 1}]}',
            "without one query",
        ),
    ],
)
async def test_rt68_a_garbage_answer_is_an_error_never_a_partial_list(
    google: Google, raw: bytes, expected: str
) -> None:
    google.console.add_property(SITE)
    google.console.add_rows(SITE, _rows(150))
    google.console.inject("searchanalytics.query", status=200, raw=raw, times=1)
    client = google.client()
    try:
        with pytest.raises(SearchConsoleError, match=expected) as failed:
            await client.queries(
                SITE, start=date(2026, 2, 1), end=date(2026, 2, 28), credentials=google.account()
            )
    finally:
        await client.aclose()
    assert not failed.value.transient
    assert google.console.count("searchanalytics.query") == 1


async def test_rt68_a_page_that_times_out_is_retried_then_reported(google: Google) -> None:
    google.console.add_property(SITE)
    google.console.add_rows(SITE, _rows(150))
    google.console.inject("searchanalytics.query", delay_seconds=2.0, times=1)
    client = google.client(timeout_seconds=0.3)
    try:
        rows = await client.queries(  # the one slow answer is retried once, then read
            SITE, start=date(2026, 2, 1), end=date(2026, 2, 28), credentials=google.account()
        )
        assert len(rows) == 150
        google.console.inject("searchanalytics.query", delay_seconds=2.0, times=-1)
        with pytest.raises(SearchConsoleError, match="did not answer in time") as failed:
            await client.queries(
                SITE, start=date(2026, 2, 1), end=date(2026, 2, 28), credentials=google.account()
            )
    finally:
        await client.aclose()
    assert failed.value.transient


async def test_rt68_the_simulator_refuses_a_body_google_would_refuse(google: Google) -> None:
    google.console.add_property(SITE)
    client = google.client(page_rows=25_000)
    try:
        with pytest.raises(SearchConsoleError, match="startDate must be earlier") as refused:
            await client.queries(
                SITE, start=date(2026, 2, 5), end=date(2026, 2, 1), credentials=google.account()
            )
    finally:
        await client.aclose()
    assert refused.value.status == 400
    with pytest.raises(ValueError, match="page_rows"):
        SearchConsoleClient(google.console.url, page_rows=25_001)
