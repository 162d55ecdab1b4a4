"""Funnels webhook receivers (under ``/hooks/``; authenticated by ingest token or signature)."""

from __future__ import annotations

from typing import Any

from app.web.hooks import funnels_mail_reports, funnels_sources, funnels_unsubscribe

ROUTES: list[Any] = [
    *funnels_unsubscribe.ROUTES,
    *funnels_mail_reports.ROUTES,
    *funnels_sources.ROUTES,
]
