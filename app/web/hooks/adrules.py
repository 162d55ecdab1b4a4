"""Ad rules webhook receivers (under ``/hooks/``; authenticated by ingest token or signature)."""

from __future__ import annotations

from typing import Any

ROUTES: list[Any] = []
