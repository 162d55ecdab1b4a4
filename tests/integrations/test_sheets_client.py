"""The Sheets API v4 values client against the loopback simulator (AR-15)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from app.integrations.sheets import ApiKey, BearerToken, SheetsClient, SheetsError
from app.integrations.sheets.client import a1_range
from app.sandbox.base import simulator_in_loop
from app.sandbox.sheets import SheetsSandbox


async def _no_wait(_: float) -> None:
    return None


@pytest.fixture
async def sheets() -> AsyncIterator[tuple[SheetsSandbox, SheetsClient]]:
    sandbox = SheetsSandbox()
    sandbox.put_sheet(
        "sheet-1",
        "Targets 2026",
        [
            ["campaign_id", "name", "min_roas"],
            ["120001", "Spring", Decimal("1.25")],
            ["120002", "Summer", 3, None],
            ["120003", "Autumn", "n/a"],
        ],
    )
    async with simulator_in_loop(sandbox) as url:
        client = SheetsClient(url, retry_delays=(0.0, 0.0), sleep=_no_wait)
        yield sandbox, client
        await client.aclose()


async def test_reads_rows_with_exact_numbers_and_api_key(
    sheets: tuple[SheetsSandbox, SheetsClient],
) -> None:
    sandbox, client = sheets
    rows = await client.get_values(
        "sheet-1", a1_range("Targets 2026", "A:C"), ApiKey("sandbox-sheets-key")
    )
    assert rows[0] == ["campaign_id", "name", "min_roas"]
    assert rows[1] == ["120001", "Spring", Decimal("1.25")]
    assert isinstance(rows[1][2], Decimal)
    assert rows[2] == ["120002", "Summer", 3]  # trailing empty cell left out
    assert rows[3][2] == "n/a"
    assert sandbox.state.count("values.get") == 1


async def test_bearer_token_and_quoted_sheet_names(
    sheets: tuple[SheetsSandbox, SheetsClient],
) -> None:
    sandbox, client = sheets
    sandbox.put_sheet("sheet-1", "Bob's/targets", [["a", 1]])
    rows = await client.get_values(
        "sheet-1", a1_range("Bob's/targets"), BearerToken("sandbox-sheets-token")
    )
    assert rows == [["a", 1]]


async def test_cell_ranges_are_cut(sheets: tuple[SheetsSandbox, SheetsClient]) -> None:
    _, client = sheets
    rows = await client.get_values(
        "sheet-1", a1_range("Targets 2026", "A2:A3"), ApiKey("sandbox-sheets-key")
    )
    assert rows == [["120001"], ["120002"]]


async def test_empty_range_has_no_values(sheets: tuple[SheetsSandbox, SheetsClient]) -> None:
    sandbox, client = sheets
    sandbox.put_sheet("sheet-1", "Empty", [])
    assert await client.get_values("sheet-1", a1_range("Empty"), ApiKey("sandbox-sheets-key")) == []


@pytest.mark.parametrize(
    ("credentials", "spreadsheet", "sheet", "status"),
    [
        (ApiKey("wrong"), "sheet-1", "Targets 2026", 400),
        (BearerToken("expired"), "sheet-1", "Targets 2026", 401),
        (ApiKey("sandbox-sheets-key"), "missing", "Targets 2026", 404),
        (ApiKey("sandbox-sheets-key"), "sheet-1", "No such tab", 400),
    ],
)
async def test_permanent_errors_are_not_retried(
    sheets: tuple[SheetsSandbox, SheetsClient],
    credentials: ApiKey | BearerToken,
    spreadsheet: str,
    sheet: str,
    status: int,
) -> None:
    sandbox, client = sheets
    with pytest.raises(SheetsError) as info:
        await client.get_values(spreadsheet, a1_range(sheet), credentials)
    assert info.value.status == status
    assert not info.value.transient
    assert sandbox.state.count("values.get") == 1


async def test_transient_errors_are_retried(sheets: tuple[SheetsSandbox, SheetsClient]) -> None:
    sandbox, client = sheets
    sandbox.state.inject("values.get", status=503, times=2)
    rows = await client.get_values(
        "sheet-1", a1_range("Targets 2026"), ApiKey("sandbox-sheets-key")
    )
    assert len(rows) == 4
    assert sandbox.state.count("values.get") == 3


async def test_transient_errors_give_up_after_the_last_retry(
    sheets: tuple[SheetsSandbox, SheetsClient],
) -> None:
    sandbox, client = sheets
    sandbox.state.inject("values.get", status=429, times=-1)
    with pytest.raises(SheetsError) as info:
        await client.get_values("sheet-1", a1_range("Targets 2026"), ApiKey("sandbox-sheets-key"))
    assert info.value.transient
    assert sandbox.state.count("values.get") == 3


async def test_garbage_answer_is_an_error(sheets: tuple[SheetsSandbox, SheetsClient]) -> None:
    sandbox, client = sheets
    sandbox.state.inject("values.get", status=200, raw=b"<html>oops</html>")
    with pytest.raises(SheetsError, match="not JSON"):
        await client.get_values("sheet-1", a1_range("Targets 2026"), ApiKey("sandbox-sheets-key"))


def test_credentials_do_not_show_in_repr() -> None:
    assert "secret" not in repr(ApiKey("secret"))
    assert "secret" not in repr(BearerToken("secret"))
