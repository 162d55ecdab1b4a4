"""The demo's Graph API: two sandbox ad accounts with a few dozen campaigns, reachable with
:data:`DEMO_TOKEN`."""

from __future__ import annotations

from app.sandbox.base import ThreadedServer
from app.sandbox.meta.app import serve_world
from app.sandbox.meta.world import GraphWorld

DEMO_TOKEN = "demo-sandbox-meta-token"  # noqa: S105 - a token the loopback simulator accepts
DEMO_STORE = "act_1000001"
DEMO_BRAND = "act_1000002"


def demo_world() -> GraphWorld:
    world = GraphWorld()
    world.add_account(DEMO_STORE, "Demo store (EUR)", currency="EUR", timezone_name="Europe/Berlin")
    world.add_campaigns(
        DEMO_STORE, 12, name="Summer sale {n}", statuses=("ACTIVE", "ACTIVE", "PAUSED")
    )
    world.add_campaigns(DEMO_STORE, 12, name="Retargeting {n}", statuses=("ACTIVE", "PAUSED"))
    world.add_campaigns(
        DEMO_STORE,
        12,
        name="Brand awareness {n}",
        statuses=("ACTIVE", "ARCHIVED"),
        daily_budget=2500,
    )
    for campaign in list(world.accounts[DEMO_STORE].campaigns.values())[::5]:
        campaign.delivering = False  # a few campaigns with no delivery: sums read 0, ratios none
    world.add_account(DEMO_BRAND, "Demo brand (JPY)", currency="JPY", timezone_name="Asia/Tokyo")
    world.add_campaigns(DEMO_BRAND, 10, name="Tokyo launch {n}", daily_budget=3000)
    world.grant(DEMO_TOKEN, DEMO_STORE, DEMO_BRAND)
    return world


def start_demo_sandbox() -> ThreadedServer:
    """Serve the demo world on a loopback port (``PLUGIN.sandboxes["meta"]``)."""
    return serve_world(demo_world())
