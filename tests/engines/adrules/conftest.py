"""Ad rules fixtures (defined in ``support`` so browser tests can share them)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.integrations.meta.client import GraphClient
from app.settings import Settings
from tests.engines.adrules.support import graph_server, other_ws, settings, world, ws

__all__ = ["graph", "graph_server", "other_ws", "settings", "world", "ws"]


@pytest.fixture
async def graph(settings: Settings) -> AsyncIterator[GraphClient]:
    client = GraphClient(
        settings.integrations.meta_graph_url, settings.integrations.meta_graph_version
    )
    yield client
    await client.aclose()
