"""The demo's Graph API: two sandbox ad accounts with a few dozen campaigns, reachable with
:data:`DEMO_TOKEN`; and the demo's Google Sheet, a campaign plan giving each campaign of the demo
store a priority that the demo rule reads as a custom metric."""

from __future__ import annotations

from app.sandbox.base import ThreadedServer
from app.sandbox.meta.app import serve_world
from app.sandbox.meta.world import GraphWorld
from app.sandbox.sheets import SheetsSandbox, SimCell, start_sheets_sandbox

DEMO_TOKEN = "demo-sandbox-meta-token"  # noqa: S105 - a token the loopback simulator accepts
DEMO_STORE = "act_1000001"
DEMO_BRAND = "act_1000002"

DEMO_SHEET_ID = "demo-campaign-plan-2026"
DEMO_SHEET_NAME = "Campaign plan"
DEMO_SHEETS_KEY = "sandbox-sheets-key"
"""The API key the Sheets simulator accepts (a demo value, not a secret)."""


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
    """Serve the demo world on a loopback port (the demo's ``meta`` simulator)."""
    return serve_world(demo_world())


def demo_sheets() -> SheetsSandbox:
    """The campaign plan: a header row, then campaign id (A), name (B) and priority 1-3 (C) for
    every campaign of the demo store."""
    rows: list[list[SimCell]] = [["Campaign id", "Campaign", "Priority"]]
    campaigns = demo_world().accounts[DEMO_STORE].campaigns.values()
    rows += [[c.id, c.name, 3 - i % 3] for i, c in enumerate(campaigns)]
    sandbox = SheetsSandbox(api_keys={DEMO_SHEETS_KEY})
    sandbox.put_sheet(DEMO_SHEET_ID, DEMO_SHEET_NAME, rows)
    return sandbox


def start_demo_sheets_sandbox() -> ThreadedServer:
    """Serve the demo's campaign plan on a loopback port (the demo's ``sheets`` simulator)."""
    return start_sheets_sandbox(demo_sheets())
