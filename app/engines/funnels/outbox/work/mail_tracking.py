"""The tracking settings the e-mail channel signs funnel mail with: the app's public URL and each
workspace's webhook secret (decrypted once per workspace and reused for a few minutes, so a
changed secret is picked up without a restart, measured on the process's clock)."""

from __future__ import annotations

from sqlalchemy import select

from app.clock import Clock
from app.db.session import Database
from app.engines.funnels.events.tracking import Tracking
from app.platform.crypto import SecretBox
from app.platform.models import Workspace
from app.platform.service import webhook_secret
from app.ttl_cache import TtlCache

CACHE_SECONDS = 300.0


class WorkspaceTracking:
    """``await tracking(workspace_id)`` → :class:`Tracking`, or ``None`` for an unknown workspace."""

    def __init__(self, db: Database, secrets: SecretBox, base_url: str, clock: Clock) -> None:
        self.db = db
        self.secrets = secrets
        self.base_url = base_url
        self._known: TtlCache[int, Tracking] = TtlCache(clock, CACHE_SECONDS)

    async def __call__(self, workspace_id: int) -> Tracking | None:
        known = self._known.get(workspace_id)
        if known is not None:
            return known
        async with self.db.read() as session:
            workspace = await session.scalar(select(Workspace).where(Workspace.id == workspace_id))
        if workspace is None:
            return None
        tracking = Tracking(self.base_url, webhook_secret(self.secrets, workspace))
        self._known.put(workspace_id, tracking)
        return tracking
