"""The provider client shared by a process's jobs (one HTTP connection pool, closed at exit)."""

from __future__ import annotations

from app.integrations.serp import SerpClient
from app.scheduling.resources import Resources
from app.settings import Settings

RESOURCE_KEY = "ranktracking.serp_client"


def serp_client(resources: Resources, settings: Settings) -> SerpClient:
    """The process's client, built from the settings on first use. Tests and the demo put one
    pointed at the loopback simulator under :data:`RESOURCE_KEY` (only the base URL differs)."""
    return resources.get(RESOURCE_KEY, lambda: SerpClient.from_settings(settings.integrations))
