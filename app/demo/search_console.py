"""The demo's Google Search Console: a property of the demo site with three months of queries
(some of them the demo's tracked keywords, most not yet), served with Google's token endpoint
on one loopback port, and the demo workspace's service-account key that reads it — so "Import
from Search Console" on a schedule's page works in ``make run``.

The simulator keeps its service accounts in memory. The key is stored once in the workspace (the
secret Sheets and Search Console read); at every start, the running simulator is told that key
again, so the import keeps working across restarts. A key a person stored in its place is left
alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING

from app.integrations.sheets.service_account import SERVICE_ACCOUNT_SECRET
from app.platform.service import get_secret, set_secret
from app.sandbox.meta.demo import demo_sheets
from app.sandbox.search_console import (
    QueryRow,
    SearchConsoleSandbox,
    start_search_console_sandbox,
)
from app.sandbox.sheets import SheetsSandbox
from app.sandbox.sheets import start_sheets_sandbox as start_sheets_simulator

if TYPE_CHECKING:
    from app.demo.parts import SandboxHandle
    from app.runtime import Runtime

SANDBOX = "search_console"
DEMO_PROPERTY = "sc-domain:sweepline-demo.com"
DEMO_URL_PROPERTY = "https://www.sweepline-demo.com/blog/"
DEMO_ACCOUNT = "rank-tracking@sweepline-demo.iam.gserviceaccount.com"
DAYS = 90

# (query, daily impressions, click-through rate in %, average position)
DEMO_QUERIES = [
    ("trail running shoes", 420, 6.5, 3.4),
    ("waterproof hiking boots", 310, 3.1, 7.2),
    ("best trail running shoes 2026", 260, 4.2, 5.8),
    ("lightweight rain jacket", 240, 1.4, 11.6),
    ("merino base layer", 190, 14.0, 1.3),
    ("hiking boots women", 170, 2.2, 9.1),
    ("ultralight backpacking tent", 150, 1.1, 14.8),
    ("gore-tex jacket review", 120, 3.8, 6.3),
    ("merino socks hiking", 110, 5.5, 4.1),
    ("2 person backpacking tent", 95, 0.9, 17.4),
    ("trekking poles", 90, 3.0, 8.9),
    ("down sleeping bag", 80, 0.2, 42.0),
    ("hydration vest", 75, 0.8, 27.5),
    ("trail running vest women", 60, 2.6, 8.2),
    ("camping stove lightweight", 45, 1.0, 15.9),
    ("headlamp for running", 40, 4.8, 4.7),
    ("sleeping pad r value", 30, 0.6, 22.3),
    ("how to lace hiking boots", 25, 9.0, 2.1),
    ("water filter hiking", 12, 0.5, 33.0),
    ("sweepline demo outdoor", 8, 30.0, 1.0),
]
BLOG_QUERIES = [
    ("how to choose trail running shoes", 140, 5.0, 4.4),
    ("layering system hiking", 60, 3.3, 6.9),
]


def demo_rows(queries: list[tuple[str, int, float, float]], today: date) -> list[QueryRow]:
    """A row per query and day over the last :data:`DAYS` days, the figures varying a little
    from day to day (deterministically: every start shows the same)."""
    rows = []
    for index, (query, impressions, ctr, position) in enumerate(queries):
        for back in range(DAYS):
            wave = ((back * 7 + index * 3) % 11 - 5) / 10  # -0.5 .. +0.5
            shown = max(1, round(impressions * (1 + wave / 2)))
            rows.append(
                QueryRow(
                    query,
                    (today - timedelta(days=back)).isoformat(),
                    round(shown * ctr / 100),
                    shown,
                    max(1.0, round(position + wave, 1)),
                    fresh=back < 2,  # Google completes the last two days later
                )
            )
    return rows


def fill(console: SearchConsoleSandbox, today: date) -> None:
    """The demo's properties with their queries up to ``today`` (the process's clock's)."""
    console.reset_data()
    console.add_property(DEMO_PROPERTY)
    console.add_rows(DEMO_PROPERTY, demo_rows(DEMO_QUERIES, today))
    console.add_property(DEMO_URL_PROPERTY, "siteFullUser")
    console.add_rows(DEMO_URL_PROPERTY, demo_rows(BLOG_QUERIES, today))


@dataclass
class _Running:
    """The simulators this process serves (set as the demo starts them). ``google`` is the one
    token endpoint's state: the demo workspace has one service-account key (the secret the ad
    rules' Sheets reads use too, before their API key), so the tokens it mints must open both
    the Sheets and the Search Console simulators."""

    google: SheetsSandbox | None = None
    console: SearchConsoleSandbox | None = None


RUNNING = _Running()


def start_sheets_sandbox() -> SandboxHandle:
    """The demo's campaign plan in the Sheets simulator (the ad rules' custom metric), whose
    service accounts the Search Console simulator shares when it starts after it."""
    sheets = demo_sheets()
    RUNNING.google = sheets
    return start_sheets_simulator(sheets)


def start_sandbox() -> SandboxHandle:
    """The Search Console API and Google's token endpoint on one loopback port."""
    google = RUNNING.google or SheetsSandbox(api_keys=set(), bearer_tokens=set())
    console = SearchConsoleSandbox(google=google)  # its data: on_start, on the app's clock
    RUNNING.google, RUNNING.console = google, console
    return start_search_console_sandbox(console, token_endpoint=True)


def _client_email(key_json: str) -> str | None:
    try:
        value = json.loads(key_json).get("client_email")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


async def on_start(runtime: Runtime, workspace_id: int, urls: dict[str, str]) -> None:
    """Fill the simulator with queries up to today; store the demo key the first time,
    afterwards tell the running simulator the stored one (it forgot it when the last process
    ended)."""
    console = RUNNING.console
    if SANDBOX not in urls or console is None:
        return  # a real Search Console is configured: its key is the person's to store
    fill(console, runtime.clock.now().date())
    async with runtime.db.write() as uow:
        stored = await get_secret(
            uow.session, runtime.secrets, workspace_id=workspace_id, name=SERVICE_ACCOUNT_SECRET
        )
        if stored is None:
            await set_secret(
                uow.session,
                runtime.secrets,
                workspace_id=workspace_id,
                name=SERVICE_ACCOUNT_SECRET,
                value=console.google.new_service_account(DEMO_ACCOUNT),
                now=runtime.clock.now(),
            )
        elif _client_email(stored) == DEMO_ACCOUNT:
            console.google.add_service_account(stored)
