"""Custom metrics read from a Google Sheet (spec AR-15).

A custom-metric condition names a spreadsheet, a sheet, a lookup column matched against the campaign
id and a value column read as a number. A sheet's rows are kept in memory for **2 minutes from last
access** (each read pushes the expiry out again) and 5 minutes from the fetch at most, measured on
the runtime's clock. Every live read is also saved to the database — by the worker, also when a
preview (which saves nothing) filled the cache — and when a live read fails the saved copy is used
instead, unless it is older than the configured limit. The record says where the rows came from
and how old they were. A missing row, an empty or non-numeric cell is a condition error; a sheet
that can be read neither live nor from a usable copy is a sheet failure the record shows as an
error, never a crash of the run.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from app.clock import Clock
from app.db.dialect import upsert
from app.db.session import Database
from app.db.tenancy import scoped_select
from app.engines.adrules.run_models import SheetCopy
from app.integrations.sheets import (
    ApiKey,
    BearerToken,
    Cell,
    ServiceAccount,
    SheetsClient,
    SheetsError,
    TokenMinter,
)
from app.integrations.sheets.client import SheetsCredentials, a1_range
from app.integrations.sheets.service_account import SERVICE_ACCOUNT_SECRET
from app.platform.crypto import SecretBox
from app.platform.service import get_secret

CACHE_TTL = timedelta(minutes=2)
"""How long a sheet's rows stay in memory after they were last read."""
CACHE_MAX_AGE = timedelta(minutes=5)
"""How long after the fetch they stay at most, however often they are read: a rule running every
minute keeps touching the cache, and must still see an edit to the sheet."""
COPY_MAX_AGE = timedelta(hours=24)
"""The oldest database copy used when a live read fails (``ADRULES_SHEET_COPY_MAX_AGE_MINUTES``)."""

SOURCE_LIVE = "live"
SOURCE_CACHE = "cache"
SOURCE_COPY = "copy"

SHEETS_API_KEY_SECRET = "google_sheets_api_key"  # noqa: S105 - a secret's name, not a secret
"""Workspace secret holding a Google API key (sheets shared with "anyone with the link")."""
SHEETS_TOKEN_SECRET = "google_sheets_access_token"  # noqa: S105
"""Workspace secret holding an OAuth access token (a service account the sheet is shared with)."""
SHEETS_SERVICE_ACCOUNT_SECRET = SERVICE_ACCOUNT_SECRET
"""Workspace secret holding a service account's JSON key: access tokens are minted from it (and
cached until they expire) whenever a sheet is read."""


@dataclass(frozen=True, slots=True)
class SheetRef:
    workspace_id: int
    spreadsheet_id: str
    sheet_name: str


@dataclass(frozen=True, slots=True)
class SheetRows:
    """A sheet's rows and where they came from: ``cache``, ``live`` or ``copy`` (the database),
    fetched from the Sheets API at ``fetched_at``."""

    rows: list[list[Cell]]
    source: str
    fetched_at: datetime
    warning: str | None = None
    """Why the database copy was used (the live read's error)."""


@dataclass(frozen=True, slots=True)
class SheetFailure:
    """A sheet that can be read neither live nor from a usable database copy."""

    message: str


@dataclass(frozen=True, slots=True)
class CustomValue:
    """A custom metric's number for one campaign, or why there is none."""

    value: Decimal | None
    error: str | None = None
    source: str = ""


@dataclass
class _Entry:
    rows: list[list[Cell]]
    fetched_at: datetime
    expires_at: datetime
    saved: bool
    """Whether these rows are in the database copy: a preview fills the cache without saving, and
    the worker's next read of the entry saves them, so a restart during an outage has a copy."""


@dataclass
class SheetCache:
    """Sheets in memory, per workspace, each expiring 2 minutes after its last access and at the
    latest 5 minutes after it was fetched."""

    ttl: timedelta = CACHE_TTL
    max_age: timedelta = CACHE_MAX_AGE
    _entries: dict[SheetRef, _Entry] = field(default_factory=dict)
    _locks: dict[SheetRef, asyncio.Lock] = field(default_factory=dict)

    def get(self, ref: SheetRef, now: datetime) -> _Entry | None:
        entry = self._entries.get(ref)
        if entry is None:
            return None
        if now >= entry.expires_at or now >= entry.fetched_at + self.max_age:
            del self._entries[ref]
            return None
        entry.expires_at = now + self.ttl  # from last access, not from the fetch
        return entry

    def put(self, ref: SheetRef, rows: list[list[Cell]], now: datetime, *, saved: bool) -> None:
        self._entries[ref] = _Entry(
            rows=rows, fetched_at=now, expires_at=now + self.ttl, saved=saved
        )

    def lock(self, ref: SheetRef) -> asyncio.Lock:
        # One read per sheet at a time: campaigns of one run asking together cause one fetch.
        return self._locks.setdefault(ref, asyncio.Lock())


def describe_age(age: timedelta) -> str:
    """``45 s``, ``12 min``, ``3 h 5 min``, ``2 d 1 h``: an age as a person reads it."""
    seconds = max(0, int(age.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def column_index(letters: str) -> int:
    """``A`` → 0, ``Z`` → 25, ``AA`` → 26."""
    index = 0
    for ch in letters.upper():
        index = index * 26 + (ord(ch) - ord("A") + 1)
    return index - 1


def _as_text(cell: Cell) -> str:
    if isinstance(cell, bool):
        return str(cell).upper()
    return str(cell).strip()


COMMA_DECIMAL_LANGUAGES = frozenset(
    [
        "de",
        "fr",
        "es",
        "it",
        "id",
        "nl",
        "pt",
        "ru",
        "pl",
        "tr",
        "sv",
        "da",
        "nb",
        "no",
        "fi",
        "cs",
        "sk",
        "hu",
        "ro",
        "bg",
        "hr",
        "sl",
        "sr",
        "uk",
        "el",
        "vi",
        "lt",
        "lv",
        "et",
    ]
)
"""Languages whose locales write a decimal comma (and a point or space between thousands)."""
_PLAIN = re.compile(r"^[+-]?\d+(\.\d+)?$")
_THOUSANDS_POINT = re.compile(r"^[+-]?[1-9]\d{0,2}(\.\d{3})+$")
"""``1.234``: a thousand in a decimal-comma locale, one and a bit elsewhere."""
_POINT_DECIMAL = re.compile(r"^[+-]?\d{1,3}(,\d{3})*(\.\d+)?$")
_COMMA_DECIMAL = re.compile(r"^[+-]?\d{1,3}([. ]\d{3})*(,\d+)?$|^[+-]?\d+(,\d+)?$")


class Ambiguous(ValueError):
    """Text that reads as a different number depending on the sheet's locale."""


def _as_number(cell: Cell, locale: str | None = None) -> Decimal | None:
    """A cell's number. Numbers stay exact; text is read by the sheet's ``locale`` when the
    condition names one, and otherwise only when no locale could read it differently (raises
    :class:`Ambiguous`) — ``"1,5"`` and ``"1.234,50"`` are never guessed."""
    if isinstance(cell, bool):
        return None
    if isinstance(cell, int | Decimal):
        return Decimal(cell)
    text = cell.strip().replace("\u00a0", " ")
    if locale is None:
        if _THOUSANDS_POINT.match(text) or ("," in text and _number_like(text)):
            raise Ambiguous(text)
        if not _PLAIN.match(text):
            return None
        normalised = text
    elif locale.split("_")[0] in COMMA_DECIMAL_LANGUAGES:
        if not _COMMA_DECIMAL.match(text):
            return None
        normalised = text.replace(".", "").replace(" ", "").replace(",", ".")
    else:
        if not (_POINT_DECIMAL.match(text) or _PLAIN.match(text)):
            return None
        normalised = text.replace(",", "")
    try:
        number = Decimal(normalised)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _number_like(text: str) -> bool:
    return bool(re.fullmatch(r"[+-]?[\d.,]+", text))


def lookup(
    rows: list[list[Cell]],
    campaign_id: str,
    lookup_column: str,
    value_column: str,
    locale: str | None = None,
) -> CustomValue:
    """The number in ``value_column`` of the first row whose ``lookup_column`` is the campaign id."""
    found = index_sheet(rows, lookup_column, value_column, locale).get(campaign_id)
    return found if found is not None else missing_row(campaign_id, lookup_column)


def index_sheet(
    rows: list[list[Cell]], lookup_column: str, value_column: str, locale: str | None = None
) -> dict[str, CustomValue]:
    """Every campaign id of ``lookup_column`` with its value (or the cell's error); first row wins.

    One pass per sheet and run, so ten thousand campaigns cost one dictionary, not ten thousand
    scans."""
    key_at, value_at = column_index(lookup_column), column_index(value_column)
    out: dict[str, CustomValue] = {}
    for row in rows:
        if key_at >= len(row):
            continue
        key = _as_text(row[key_at])
        if not key or key in out:
            continue
        cell = row[value_at] if value_at < len(row) else ""
        try:
            number = None if cell == "" else _as_number(cell, locale)
        except Ambiguous:
            out[key] = CustomValue(
                None,
                f"the cell {value_column} of campaign {key} is {cell!r}, which reads as a different "
                "number in different locales: name the sheet's locale on the condition (e.g. "
                "de_DE or en_US)",
            )
            continue
        if cell == "":
            out[key] = CustomValue(None, f"the cell {value_column} of campaign {key} is empty")
        elif number is None:
            out[key] = CustomValue(
                None, f"the cell {value_column} of campaign {key} is not a number: {cell!r}"
            )
        else:
            out[key] = CustomValue(number)
    return out


def missing_row(campaign_id: str, lookup_column: str) -> CustomValue:
    return CustomValue(None, f"no row has campaign {campaign_id} in column {lookup_column}")


def _to_json(rows: list[list[Cell]]) -> list[list[Any]]:
    # Decimals are kept as their exact text; JSON numbers would go through float.
    return [[str(c) if isinstance(c, Decimal) else c for c in row] for row in rows]


async def workspace_credentials(
    db: Database, secrets: SecretBox, workspace_id: int, minter: TokenMinter | None = None
) -> SheetsCredentials | None:
    """The workspace's Sheets credentials: an access token if set, else a service-account key
    (when ``minter`` can mint its tokens), else an API key."""
    async with db.read() as session:
        token = await get_secret(
            session, secrets, workspace_id=workspace_id, name=SHEETS_TOKEN_SECRET
        )
        if token:
            return BearerToken(token)
        if minter is not None:
            account_key = await get_secret(
                session, secrets, workspace_id=workspace_id, name=SHEETS_SERVICE_ACCOUNT_SECRET
            )
            if account_key:
                return ServiceAccount(account_key, minter)
        key = await get_secret(
            session, secrets, workspace_id=workspace_id, name=SHEETS_API_KEY_SECRET
        )
    return ApiKey(key) if key else None


class CustomMetricSource:
    """Reads custom metrics for one workspace through the shared cache, client and database."""

    def __init__(
        self,
        *,
        db: Database,
        clock: Clock,
        client: SheetsClient,
        cache: SheetCache,
        workspace_id: int,
        credentials: SheetsCredentials | None,
        save_copies: bool = True,
        copy_max_age: timedelta = COPY_MAX_AGE,
    ) -> None:
        self._db = db
        self._clock = clock
        self._client = client
        self._cache = cache
        self._workspace_id = workspace_id
        self._credentials = credentials
        self._save_copies = save_copies
        self._copy_max_age = copy_max_age

    async def rows(self, spreadsheet_id: str, sheet_name: str) -> SheetRows | SheetFailure:
        """The sheet's rows, or why they cannot be had."""
        ref = SheetRef(self._workspace_id, spreadsheet_id, sheet_name)
        async with self._cache.lock(ref):
            now = self._clock.now()
            cached = self._cache.get(ref, now)
            if cached is not None:
                if self._save_copies and not cached.saved:
                    # Read live by a preview, which saves nothing: the copy is refreshed now.
                    await self._save(ref, cached.rows, cached.fetched_at)
                    cached.saved = True
                return SheetRows(cached.rows, SOURCE_CACHE, cached.fetched_at)
            try:
                if self._credentials is None:
                    raise SheetsError(
                        "no Google Sheets credentials are configured for the workspace"
                    )
                rows = await self._client.get_values(
                    spreadsheet_id, a1_range(sheet_name), self._credentials
                )
            except SheetsError as exc:
                return await self._from_copy(ref, exc.message)
            now = self._clock.now()
            if self._save_copies:
                await self._save(ref, rows, now)
            self._cache.put(ref, rows, now, saved=self._save_copies)
            return SheetRows(rows, SOURCE_LIVE, now)

    async def value(
        self,
        *,
        spreadsheet_id: str,
        sheet_name: str,
        lookup_column: str,
        value_column: str,
        campaign_id: str,
    ) -> CustomValue:
        got = await self.rows(spreadsheet_id, sheet_name)
        if isinstance(got, SheetFailure):
            return CustomValue(None, got.message)
        found = lookup(got.rows, campaign_id, lookup_column, value_column)
        error = found.error
        if error is None and got.warning:
            return CustomValue(found.value, None, f"{got.source} ({got.warning})")
        return CustomValue(found.value, error, got.source)

    async def _from_copy(self, ref: SheetRef, live_error: str) -> SheetRows | SheetFailure:
        async with self._db.read() as session:
            copy = await session.scalar(
                scoped_select(SheetCopy, ref.workspace_id).where(
                    SheetCopy.spreadsheet_id == ref.spreadsheet_id,
                    SheetCopy.sheet_name == ref.sheet_name,
                )
            )
        if copy is None:
            return SheetFailure(
                f"the sheet could not be read ({live_error}) and no saved copy exists"
            )
        age = self._clock.now() - copy.fetched_at
        if age > self._copy_max_age:
            # Targets a day old may no longer be what the sheet says: refuse rather than act.
            return SheetFailure(
                f"the sheet could not be read ({live_error}) and its saved copy is "
                f"{describe_age(age)} old, older than the limit of {describe_age(self._copy_max_age)}"
            )
        rows: list[list[Cell]] = [list(r) for r in copy.rows]
        return SheetRows(
            rows, SOURCE_COPY, copy.fetched_at, warning=f"live read failed: {live_error}"
        )

    async def _save(self, ref: SheetRef, rows: list[list[Cell]], now: datetime) -> None:
        values = {
            "workspace_id": ref.workspace_id,
            "spreadsheet_id": ref.spreadsheet_id,
            "sheet_name": ref.sheet_name,
            "rows": _to_json(rows),
            "fetched_at": now,
        }
        stmt = upsert(
            self._db,
            SheetCopy,
            conflict=["workspace_id", "spreadsheet_id", "sheet_name"],
            update=["rows", "fetched_at"],
            # A copy saved by another process from a later read is never replaced by older rows.
            where=SheetCopy.fetched_at <= now,
        ).values(values)
        async with self._db.write() as uow:
            await uow.session.execute(stmt)
