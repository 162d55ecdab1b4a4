"""Google Sheets API v4: read a range of cell values (read-only)."""

from app.integrations.sheets.client import (
    ApiKey,
    BearerToken,
    Cell,
    SheetsClient,
    SheetsCredentials,
    SheetsError,
)
from app.integrations.sheets.service_account import ServiceAccount, TokenMinter

__all__ = [
    "ApiKey",
    "BearerToken",
    "Cell",
    "ServiceAccount",
    "SheetsClient",
    "SheetsCredentials",
    "SheetsError",
    "TokenMinter",
]
