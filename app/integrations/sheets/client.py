"""A read-only client of the Google Sheets API v4 ``values`` endpoint.

``GET /v4/spreadsheets/{id}/values/{range}`` with either an API key (``?key=``) or an OAuth bearer
token (a service account's access token, given as is or minted on demand by
:mod:`.service_account`). Values are requested unformatted, so numbers arrive as
JSON numbers; they are decoded straight into :class:`~decimal.Decimal` (never through float).
Transient failures (429, 5xx, connection errors) are retried a few times with a short backoff
under the shared :class:`~app.integrations.http_guard.RetryPolicy`; everything else raises
:class:`SheetsError` (an :class:`~app.integrations.http_guard.OutboundError`) at once. The client
comes from the shared outbound core; the Sheets URL is the operator's setting, never a workspace's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol
from urllib.parse import quote

import httpx
import msgspec

from app.integrations.http_guard import (
    ClientOptions,
    OutboundError,
    RetryPolicy,
    classify_exception,
    is_transient_status,
    outbound_client,
)
from app.integrations.http_guard.user_agent import USER_AGENT

Cell = str | int | Decimal | bool
"""One cell as the API returns it unformatted: text, a whole or decimal number, or a boolean."""

Sleep = Callable[[float], Awaitable[None]]

PROVIDER = "google_sheets"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A Google Cloud API key (works for sheets shared as "anyone with the link")."""

    key: str

    def __repr__(self) -> str:  # keep the key out of logs and tracebacks
        return "ApiKey(***)"


@dataclass(frozen=True, slots=True)
class BearerToken:
    """An OAuth 2 access token, e.g. minted for a service account the sheet is shared with."""

    token: str

    def __repr__(self) -> str:
        return "BearerToken(***)"


class TokenSource(Protocol):
    """Credentials that turn into a bearer token when a read needs one (a service account)."""

    async def bearer(self) -> BearerToken: ...


SheetsCredentials = ApiKey | BearerToken | TokenSource


class SheetsError(OutboundError):
    """The Sheets API (or Google's token endpoint) refused or failed the read."""

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False) -> None:
        super().__init__(message, provider=PROVIDER, status=status)
        self.transient = transient

    def __str__(self) -> str:
        return self.message


class _ErrorDetail(msgspec.Struct):
    code: int = 0
    message: str = ""
    status: str = ""


class _ErrorBody(msgspec.Struct):
    error: _ErrorDetail


_decoder = msgspec.json.Decoder(float_hook=Decimal)


def a1_range(sheet_name: str, cells: str = "") -> str:
    """``'Sheet name'!A:Z`` with the quoting A1 notation needs (a quote inside is doubled)."""
    quoted = "'" + sheet_name.replace("'", "''") + "'"
    return f"{quoted}!{cells}" if cells else quoted


def _parse_rows(raw: bytes) -> list[list[Cell]]:
    try:
        body = _decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise SheetsError(f"the Sheets API answered something that is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise SheetsError("the Sheets API answered an unexpected shape")
    values = body.get("values", [])  # an empty range has no "values" key at all
    if not isinstance(values, list) or not all(isinstance(r, list) for r in values):
        raise SheetsError("the Sheets API answered values that are not a list of rows")
    rows: list[list[Cell]] = []
    for row in values:
        cells: list[Cell] = []
        for cell in row:
            if not isinstance(cell, str | int | Decimal | bool):
                raise SheetsError("the Sheets API answered a cell of an unexpected type")
            cells.append(cell)
        rows.append(cells)
    return rows


def _error_from(response: httpx.Response) -> SheetsError:
    message = f"HTTP {response.status_code}"
    try:
        detail = msgspec.json.decode(response.content, type=_ErrorBody).error
        message = f"{detail.status or response.status_code}: {detail.message}"
    except msgspec.DecodeError:
        pass
    return SheetsError(
        message,
        status=response.status_code,
        transient=is_transient_status(response.status_code),
    )


class SheetsClient:
    """One shared HTTP client for the Sheets API; close it with :meth:`aclose`."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_seconds: float = 30.0,
        user_agent: str = USER_AGENT,
        retry_delays: Sequence[float] = (0.25, 1.0),
        sleep: Sleep = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = outbound_client(
            provider=PROVIDER,
            options=ClientOptions(timeout_seconds=timeout_seconds, user_agent=user_agent),
            base_url=base_url.rstrip("/"),
            transport=transport,
        )
        self._policy = RetryPolicy(schedule=tuple(retry_delays), sleep=sleep)

    async def get_values(
        self, spreadsheet_id: str, range_a1: str, credentials: SheetsCredentials
    ) -> list[list[Cell]]:
        """The rows of ``range_a1`` (trailing empty cells and rows are omitted, as the API does)."""
        path = (
            f"/v4/spreadsheets/{quote(spreadsheet_id, safe='')}/values/{quote(range_a1, safe='')}"
        )
        params = {"majorDimension": "ROWS", "valueRenderOption": "UNFORMATTED_VALUE"}
        headers: dict[str, str] = {}
        if not isinstance(credentials, ApiKey | BearerToken):
            credentials = await credentials.bearer()
        if isinstance(credentials, ApiKey):
            params["key"] = credentials.key
        else:
            headers["Authorization"] = f"Bearer {credentials.token}"

        async def once() -> list[list[Cell]]:
            try:
                response = await self._http.get(path, params=params, headers=headers)
            except httpx.TransportError as exc:
                raise SheetsError(
                    f"could not reach the Sheets API: {exc!r}",
                    transient=classify_exception(exc).transient,
                ) from None
            if response.status_code != 200:
                raise _error_from(response)
            return _parse_rows(response.content)

        return await self._policy.run(once)

    async def aclose(self) -> None:
        await self._http.aclose()
