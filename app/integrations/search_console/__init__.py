"""Google Search Console API (``webmasters/v3``): properties and search queries (read-only)."""

from app.integrations.search_console.client import (
    SCOPE,
    Property,
    QueryRow,
    SearchConsoleClient,
    SearchConsoleError,
)

__all__ = ["SCOPE", "Property", "QueryRow", "SearchConsoleClient", "SearchConsoleError"]
