"""Funnels dashboard pages."""

from __future__ import annotations

from typing import Any

NAV: list[tuple[str, str]] = []
"""(href, label) links this engine adds to the navigation bar."""

ROUTES: list[Any] = []
"""Page handlers; they receive ``principal`` (signed-in person) and ``runtime``."""

PUBLIC_ROUTES: list[Any] = []
"""Handlers reachable without signing in (hosted forms, tracking, snippets)."""
