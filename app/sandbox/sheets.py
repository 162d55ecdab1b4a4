"""A loopback simulator of the Google Sheets API v4 ``values.get`` endpoint.

It answers ``GET /v4/spreadsheets/{id}/values/{range}`` the way Google does for the subset the
product uses: A1 ranges (``'Sheet'``, ``'Sheet'!A:C``, ``'Sheet'!A2:C50``), unformatted values
(numbers as JSON numbers), trailing empty cells and rows left out, an absent ``values`` key for an
empty range, API-key or bearer-token authentication, and Google's error shape
``{"error": {"code", "message", "status"}}``. Every call is counted as ``values.get`` and faults can
be injected through :class:`~app.sandbox.base.SandboxState`.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import msgspec
from litestar import Litestar, MediaType, Request, Response, get
from litestar.params import FromPath

from app.sandbox.base import SandboxState, ThreadedServer, fault_response

SimCell = str | int | Decimal | bool | None
"""A stored cell; ``None`` is an empty cell."""

_encoder = msgspec.json.Encoder(decimal_format="number")
_CELL = re.compile(r"^([A-Za-z]{1,3})(\d*)$")


@dataclass
class SheetsSandbox:
    """The simulator's data: spreadsheets by id, each a dict of sheet name → rows."""

    state: SandboxState = field(default_factory=SandboxState)
    spreadsheets: dict[str, dict[str, list[list[SimCell]]]] = field(default_factory=dict)
    api_keys: set[str] = field(default_factory=lambda: {"sandbox-sheets-key"})
    bearer_tokens: set[str] = field(default_factory=lambda: {"sandbox-sheets-token"})
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def put_sheet(self, spreadsheet_id: str, sheet_name: str, rows: list[list[SimCell]]) -> None:
        with self._lock:
            self.spreadsheets.setdefault(spreadsheet_id, {})[sheet_name] = [list(r) for r in rows]

    def set_cell(
        self, spreadsheet_id: str, sheet_name: str, row: int, col: int, value: SimCell
    ) -> None:
        """Change one cell (0-based row and column), growing the sheet as needed."""
        with self._lock:
            rows = self.spreadsheets[spreadsheet_id][sheet_name]
            while len(rows) <= row:
                rows.append([])
            while len(rows[row]) <= col:
                rows[row].append(None)
            rows[row][col] = value

    def read(self, spreadsheet_id: str, sheet_name: str) -> list[list[SimCell]] | None:
        with self._lock:
            sheet = self.spreadsheets.get(spreadsheet_id, {}).get(sheet_name)
            return None if sheet is None else [list(r) for r in sheet]


def column_index(letters: str) -> int:
    """``A`` → 0, ``Z`` → 25, ``AA`` → 26."""
    index = 0
    for ch in letters.upper():
        index = index * 26 + (ord(ch) - ord("A") + 1)
    return index - 1


def _split_range(range_a1: str) -> tuple[str, str]:
    if "!" in range_a1:
        sheet, _, cells = range_a1.rpartition("!")
    else:
        sheet, cells = range_a1, ""
    if len(sheet) >= 2 and sheet[0] == sheet[-1] == "'":
        sheet = sheet[1:-1].replace("''", "'")
    return sheet, cells


def _bounds(cells: str) -> tuple[int, int, int | None, int | None] | None:
    """(first row, first col, last row, last col), 0-based and inclusive; None if unparseable."""
    if not cells:
        return 0, 0, None, None
    start, _, end = cells.partition(":")
    m1 = _CELL.match(start)
    m2 = _CELL.match(end or start)
    if m1 is None or m2 is None:
        return None
    row1 = int(m1.group(2)) - 1 if m1.group(2) else 0
    row2 = int(m2.group(2)) - 1 if m2.group(2) else None
    return row1, column_index(m1.group(1)), row2, column_index(m2.group(1))


def _trim(rows: list[list[SimCell]]) -> list[list[SimCell]]:
    """Drop trailing empty cells of each row and trailing empty rows, as the API does."""
    out: list[list[SimCell]] = []
    for row in rows:
        cells = list(row)
        while cells and cells[-1] in (None, ""):
            cells.pop()
        out.append(cells)
    while out and not out[-1]:
        out.pop()
    # Empty cells inside a row come back as empty strings.
    return [["" if c is None else c for c in r] for r in out]


def _error(status: int, google_status: str, message: str) -> Response[bytes]:
    body = {"error": {"code": status, "message": message, "status": google_status}}
    return Response(_encoder.encode(body), status_code=status, media_type=MediaType.JSON)


def create_sheets_app(sandbox: SheetsSandbox) -> Litestar:
    @get("/v4/spreadsheets/{spreadsheet_id:str}/values/{range_a1:path}")
    async def values_get(
        request: Request[Any, Any, Any], spreadsheet_id: FromPath[str], range_a1: FromPath[str]
    ) -> Response[Any]:
        range_a1 = range_a1.lstrip("/")
        fault = sandbox.state.hit("values.get", spreadsheet_id=spreadsheet_id, range=range_a1)
        if fault is not None:
            return await fault_response(fault)
        key = request.query_params.get("key")
        auth = request.headers.get("authorization", "")
        if key is not None:
            if key not in sandbox.api_keys:
                return _error(
                    400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."
                )
        elif auth.lower().startswith("bearer "):
            if auth[7:].strip() not in sandbox.bearer_tokens:
                return _error(
                    401,
                    "UNAUTHENTICATED",
                    "Request had invalid authentication credentials.",
                )
        else:
            return _error(403, "PERMISSION_DENIED", "The request is missing a valid API key.")
        if spreadsheet_id not in sandbox.spreadsheets:
            return _error(404, "NOT_FOUND", "Requested entity was not found.")
        sheet_name, cells = _split_range(range_a1)
        rows = sandbox.read(spreadsheet_id, sheet_name)
        bounds = _bounds(cells)
        if rows is None or bounds is None:
            return _error(400, "INVALID_ARGUMENT", f"Unable to parse range: {range_a1}")
        row1, col1, row2, col2 = bounds
        picked = [
            r[col1 : None if col2 is None else col2 + 1]
            for r in rows[row1 : None if row2 is None else row2 + 1]
        ]
        body: dict[str, Any] = {"range": range_a1, "majorDimension": "ROWS"}
        values = _trim(picked)
        if values:
            body["values"] = values
        return Response(_encoder.encode(body), media_type=MediaType.JSON)

    return Litestar(route_handlers=[values_get], debug=False)


def start_sheets_sandbox(sandbox: SheetsSandbox | None = None) -> ThreadedServer:
    """Run the simulator on a free loopback port in its own thread (demo, benchmarks)."""
    server = ThreadedServer(create_sheets_app(sandbox or SheetsSandbox()))
    return server.start()
