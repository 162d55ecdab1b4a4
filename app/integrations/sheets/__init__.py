"""Google Sheets API v4: read a range of cell values (read-only)."""

from app.integrations.sheets.client import (
    ApiKey,
    BearerToken,
    Cell,
    SheetsClient,
    SheetsCredentials,
    SheetsError,
)

__all__ = ["ApiKey", "BearerToken", "Cell", "SheetsClient", "SheetsCredentials", "SheetsError"]
