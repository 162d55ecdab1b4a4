"""Funnels JSON API."""

from __future__ import annotations

from typing import Any

ROUTERS: list[Any] = []
