"""A loopback simulator of the Google Sheets API v4 ``values.get`` endpoint.

It answers ``GET /v4/spreadsheets/{id}/values/{range}`` the way Google does for the subset the
product uses: A1 ranges (``'Sheet'``, ``'Sheet'!A:C``, ``'Sheet'!A2:C50``), unformatted values
(numbers as JSON numbers), trailing empty cells and rows left out, an absent ``values`` key for an
empty range, API-key or bearer-token authentication, and Google's error shape
``{"error": {"code", "message", "status"}}``. Every call is counted as ``values.get`` and faults can
be injected through :class:`~app.sandbox.base.SandboxState`.

It is also Google's OAuth token endpoint for service accounts: ``POST /token`` with
``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`` and an RS256-signed ``assertion``, checked
against the public key of an account made with :meth:`SheetsSandbox.new_service_account` (counted
as ``token``); the bearer token it answers is then accepted by ``values.get`` (and, for the
Search Console scope, by the Search Console simulator).
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from litestar import Litestar, MediaType, Request, Response, get, post
from litestar.params import FromPath

from app.sandbox.base import (
    HttpSimulator,
    SandboxState,
    ThreadedServer,
    fault_response,
    simulator_app,
    start_simulator,
)

SimCell = str | int | Decimal | bool | None
"""A stored cell; ``None`` is an empty cell."""

_encoder = msgspec.json.Encoder(decimal_format="number")
_MINTED = "ya29.sandbox-"
"""The prefix of the bearer tokens the token endpoint mints."""
_CELL = re.compile(r"^([A-Za-z]{1,3})(\d*)$")
_SCOPED_APIS = ("spreadsheets", "webmasters")
"""The Google APIs whose scopes the token endpoint grants: Sheets, and Search Console (served by
:mod:`app.sandbox.search_console`, which checks its tokens here)."""


@dataclass
class SheetsSandbox(HttpSimulator):
    """The simulator's data: spreadsheets by id, each a dict of sheet name → rows. :meth:`reset`
    keeps the API keys and bearer tokens it was built with and forgets the spreadsheets, the
    service accounts and the tokens it minted."""

    state: SandboxState = field(default_factory=SandboxState)
    spreadsheets: dict[str, dict[str, list[list[SimCell]]]] = field(default_factory=dict)
    api_keys: set[str] = field(default_factory=lambda: {"sandbox-sheets-key"})
    bearer_tokens: set[str] = field(default_factory=lambda: {"sandbox-sheets-token"})
    service_accounts: dict[str, rsa.RSAPublicKey] = field(default_factory=dict)
    """Public keys of the service accounts the token endpoint knows, by ``client_email``."""
    token_scopes: dict[str, str] = field(default_factory=dict)
    """The scope each minted token was granted (Search Console accepts only its own)."""
    token_lifetime_seconds: int = 3600
    minted: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reset_data(self) -> None:
        with self._lock:
            self.spreadsheets.clear()
            self.service_accounts.clear()
            self.bearer_tokens -= {t for t in self.bearer_tokens if t.startswith(_MINTED)}
            self.token_scopes.clear()
            self.minted = 0

    def create_app(self) -> Litestar:
        return create_sheets_app(self)

    def new_service_account(self, client_email: str) -> str:
        """Register a service account and return its JSON key, as Google's console gives it."""
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        with self._lock:
            self.service_accounts[client_email] = private.public_key()
        pem = private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        return json.dumps(
            {
                "type": "service_account",
                "project_id": "sandbox",
                "private_key_id": f"key-{len(self.service_accounts)}",
                "private_key": pem,
                "client_email": client_email,
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        )

    def add_service_account(self, key_json: str) -> None:
        """Know the service account of a JSON key issued earlier (by another run of the
        simulator): its tokens are minted again."""
        key = json.loads(key_json)
        private = serialization.load_pem_private_key(key["private_key"].encode(), password=None)
        if not isinstance(private, rsa.RSAPrivateKey):
            raise ValueError("not an RSA service-account key")
        with self._lock:
            self.service_accounts[str(key["client_email"])] = private.public_key()

    def exchange(self, assertion: str, audience: str) -> tuple[int, dict[str, Any]]:
        """Check a signed JWT as Google does and answer a bearer token (or an OAuth error)."""
        try:
            header_b64, claims_b64, signature_b64 = assertion.split(".")
            header = json.loads(_unb64(header_b64))
            claims = json.loads(_unb64(claims_b64))
            signature = _unb64(signature_b64)
        except ValueError:
            return 400, _oauth_error("invalid_grant", "Invalid JWT: malformed.")
        public = self.service_accounts.get(str(claims.get("iss")))
        if header.get("alg") != "RS256" or public is None:
            return 400, _oauth_error("invalid_grant", "Invalid JWT: unknown issuer or algorithm.")
        try:
            public.verify(
                signature,
                f"{header_b64}.{claims_b64}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except InvalidSignature:
            return 400, _oauth_error("invalid_grant", "Invalid JWT Signature.")
        if claims.get("aud") != audience:
            return 400, _oauth_error("invalid_grant", "Invalid JWT: Token must be for this URL.")
        lifetime = int(claims.get("exp", 0)) - int(claims.get("iat", 0))
        if not 0 < lifetime <= 3600:
            return 400, _oauth_error("invalid_grant", "Invalid JWT: exp and iat are out of range.")
        scope = str(claims.get("scope", ""))
        if not any(api in scope for api in _SCOPED_APIS):
            return 400, _oauth_error("invalid_scope", "The scope reaches no API of this server.")
        with self._lock:
            self.minted += 1
            token = f"{_MINTED}{self.minted}"
            self.bearer_tokens.add(token)
            self.token_scopes[token] = scope
        return 200, {
            "access_token": token,
            "expires_in": self.token_lifetime_seconds,
            "token_type": "Bearer",
        }

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


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _oauth_error(error: str, description: str) -> dict[str, Any]:
    return {"error": error, "error_description": description}


def _error(status: int, google_status: str, message: str) -> Response[bytes]:
    body = {"error": {"code": status, "message": message, "status": google_status}}
    return Response(_encoder.encode(body), status_code=status, media_type=MediaType.JSON)


def _credentials_error(
    sandbox: SheetsSandbox, request: Request[Any, Any, Any]
) -> Response[bytes] | None:
    """Google's answer to a request without valid credentials: an API key (``?key=``) or an
    OAuth bearer token; ``None`` if the request carries valid ones."""
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
    return None


def create_sheets_app(sandbox: SheetsSandbox) -> Litestar:
    @get("/v4/spreadsheets/{spreadsheet_id:str}/values/{range_a1:path}")
    async def values_get(
        request: Request[Any, Any, Any], spreadsheet_id: FromPath[str], range_a1: FromPath[str]
    ) -> Response[Any]:
        range_a1 = range_a1.lstrip("/")
        fault = sandbox.state.hit("values.get", spreadsheet_id=spreadsheet_id, range=range_a1)
        if fault is not None:
            return await fault_response(fault)
        if (refused := _credentials_error(sandbox, request)) is not None:
            return refused
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

    return simulator_app([values_get, token_route(sandbox)])


def token_route(sandbox: SheetsSandbox) -> Any:
    """Google's OAuth token endpoint (``POST /token``) of ``sandbox``, as a route another
    simulator can serve beside its own (the demo's Search Console server)."""

    @post("/token", status_code=200)
    async def token(request: Request[Any, Any, Any]) -> Response[Any]:
        fault = sandbox.state.hit("token")
        if fault is not None:
            return await fault_response(fault)
        form = await request.form()
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            status, body = 400, _oauth_error("unsupported_grant_type", "Invalid grant_type.")
        else:
            audience = str(request.url).split("?", 1)[0]
            status, body = sandbox.exchange(str(form.get("assertion", "")), audience)
        return Response(_encoder.encode(body), status_code=status, media_type=MediaType.JSON)

    return token


def start_sheets_sandbox(sandbox: SheetsSandbox | None = None) -> ThreadedServer:
    """Run the simulator on a free loopback port in its own thread (demo, benchmarks)."""
    return start_simulator(sandbox or SheetsSandbox())
