"""What position tracking needs from the process, in one typed set.

The composition root builds one :class:`RankTrackingDeps` per process
(:func:`app.wiring.ranktracking_deps`, registered with the runtime's resources); the sweeps, the
jobs and the web layer read that one (:meth:`RankTrackingDeps.of`), so the provider client is
shared and closed at exit. Tests point it at the loopback simulator by providing one with their
client, or replace a field (a broker that cannot be reached, smaller settings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from app.clock import Clock
from app.db.session import Database
from app.integrations.http_guard import GuardedHttp
from app.integrations.search_console import SearchConsoleClient
from app.integrations.serp import SerpClient
from app.integrations.sheets import TokenMinter
from app.platform.crypto import SecretBox
from app.scheduling.queue import JobQueue
from app.scheduling.resources import Resources
from app.settings import Settings


class HasResources(Protocol):
    """The process's runtime or a job's context."""

    @property
    def resources(self) -> Resources: ...


@dataclass(frozen=True, slots=True)
class RankTrackingDeps:
    db: Database
    queue: JobQueue
    clock: Clock
    secrets: SecretBox
    settings: Settings
    serp: SerpClient
    """The provider client (one HTTP connection pool for the process)."""
    alert_http: GuardedHttp
    """The client of alert webhooks (the address guard applies; it holds no credentials)."""
    search_console: SearchConsoleClient
    """The Search Console client, for keywords imported from a property (RT-68)."""
    google_tokens: TokenMinter
    """Mints the workspace service account's Google tokens (the Sheets key's flow and cache)."""

    @classmethod
    def of(cls, owner: HasResources) -> RankTrackingDeps:
        """The process's dependencies, from its runtime or a job's context."""
        return owner.resources.require(cls)

    async def aclose(self) -> None:
        await self.serp.aclose()
        await self.alert_http.aclose()
        await self.search_console.aclose()
        await self.google_tokens.aclose()
