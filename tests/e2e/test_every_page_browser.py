"""Every dashboard page in a real headless Chromium, at a desktop width (1280 px) and a phone width
(375 px): no page-level horizontal scroll on the phone, no serious or critical axe-core violation, no
console error and no failed request.

The pages are not listed by hand: the test enumerates the application's GET routes, fills their path
parameters from the demo workspace (the same data ``make run`` seeds, against the loopback
simulators) and visits each. A new page is therefore checked as soon as it is routed; a route with a
path parameter the seed does not know fails with a message naming it. Responses that are not whole
documents (htmx fragments, streams) are fetched and must answer 200, but are not audited as pages.

axe-core is vendored under ``tests/e2e/vendor/axe-core`` (MPL-2.0, licence beside it) and injected as
an init script, so the page's Content-Security-Policy applies to the page and not to the audit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from litestar import Litestar
from litestar.routes import HTTPRoute
from sqlalchemy import select

from app.clock import ManualClock
from app.db.session import Database
from app.demo import ensure_demo, settings_for_sandboxes, simulated, start_sandboxes
from app.engines.adrules import rules as adrules_rules
from app.engines.adrules.claim.sweep import DISPATCH_SWEEP
from app.engines.adrules.models import Batch, Rule
from app.engines.adrules.templates import TEMPLATES as RULE_TEMPLATES
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.definitions.service import publish
from app.engines.funnels.events.claim.triggers import enroll
from app.engines.funnels.models import Contact, Funnel, FunnelVersion
from app.engines.funnels.models import Run as FunnelRun
from app.engines.ranktracking.alert_models import AlertRule
from app.engines.ranktracking.local.models import GeoGrid
from app.engines.ranktracking.models import KeywordList, ListKeyword, Schedule
from app.runtime import Runtime
from app.scheduling.bulk_models import BulkJob
from app.scheduling.dead_rows import record_dead_job
from app.scheduling.sweeper import SweepRunner
from app.settings import Settings
from app.web.app import create_app
from app.wiring import assemble
from tests.conftest import START, eventually, is_postgres, truncate_all, with_own_queue
from tests.e2e.conftest import sign_in

pytestmark = pytest.mark.browser

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
WIDTHS = (1280, 375)
# The crawl of every page at every width on the embedded default; on PostgreSQL every page is
# opened and audited once, at desktop width: what the database changes is whether a page answers
# and what it shows, not how it lays out on a phone (and CI runs both suites on two cores).
CRAWL_WIDTHS = (1280,) if is_postgres() else WIDTHS
SHARDS = 8
# Programs' endpoints and files, not pages a person opens.
# Pages that need a query parameter to show anything: the parameter, filled like path parameters.
QUERIES = {"/ui/ranktracking/schedules/{schedule_id:int}/keyword": "keyword"}
# htmx parts of the pages (refreshed in place); anything else answering without <html> is a defect.
FRAGMENT = re.compile(r"/partials/|/progress$|/stream$")
# The first-run pages (setup, accepting an invitation) exist only before the instance has an
# owner or with a live link: tests/e2e/test_first_run_browser.py audits them the same way.
NOT_PAGES = re.compile(
    r"^/(api|hooks|schema|static|health|ready|metrics)(/|$)|^/t/|^/logout$|^/favicon\.ico$"
    r"|^/setup$|^/invite/"
    # Downloads (CSV exports) and the workspace's logo are files a page links to, not pages.
    r"|\.csv$|^/ui/workspace/logo$"
    # A shared report opens only with a live link: tests/e2e/test_ranktracking_share_browser.py
    # audits it the same way.
    r"|^/shared/"
    # The two ends of Connect with Facebook: one leaves for Meta's login dialog, the other is
    # where the dialog comes back with its code and state (tests/e2e/test_facebook_login_browser.py).
    r"|^/ui/adrules/meta/(connect|callback)$"
)


@dataclasses.dataclass
class Demo:
    url: str
    email: str
    password: str
    ids: dict[str, str]
    app: Litestar


async def _publish_the_demo_funnel(runtime: Runtime) -> None:
    """The demo seeds its funnel as a draft; publish it and enrol the contacts, as a person
    trying the demo would, so version and run pages have something to show."""
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        funnel = await uow.session.scalar(select(Funnel).order_by(Funnel.id).limit(1))
        assert funnel is not None
        version = await publish(uow.session, funnel.workspace_id, funnel.id, user_id=None, now=now)
        contacts = list(
            await uow.session.scalars(
                select(Contact.id).where(Contact.workspace_id == funnel.workspace_id)
            )
        )
        await enroll(uow.session, version, now=now, contact_ids=contacts)


async def _demo_ids(runtime: Runtime) -> dict[str, str]:
    """One existing object per path parameter the dashboard's routes take."""
    async with runtime.db.read() as s:
        funnel = await s.scalar(select(Funnel).order_by(Funnel.id))
        version = await s.scalar(select(FunnelVersion).order_by(FunnelVersion.id))
        queries = {
            "rule_id": select(Rule.id),
            "batch_record_id": select(Batch.id),
            "funnel_id": select(Funnel.id),
            "run_id": select(FunnelRun.id),
            "contact_id": select(Contact.id),
            "campaign_id": select(Campaign.id),
            "schedule_id": select(Schedule.id),
            "alert_id": select(AlertRule.id),
            "list_id": select(KeywordList.id),
            "job_id": select(BulkJob.id),
            "geogrid_id": select(GeoGrid.id),
        }
        ids = {}
        for name, query in queries.items():
            value = await s.scalar(query.order_by(query.selected_columns[0]).limit(1))
            assert value is not None, f"the demo created no object for {name}"
            ids[name] = str(value)
    assert funnel is not None
    assert version is not None
    ids["number"] = str(version.number)
    async with runtime.db.read() as s:
        keyword = await s.scalar(select(ListKeyword.keyword).order_by(ListKeyword.id).limit(1))
    assert keyword is not None
    ids["keyword"] = keyword
    ids["key"] = next(iter(RULE_TEMPLATES))
    return ids


async def _a_dead_job(runtime: Runtime, clock: ManualClock) -> str:
    """A job that ran out of tries, so its page (history, retry, discard) has one to show."""
    await record_dead_job(
        runtime.db,
        clock,
        job_id="pages-dead-job",
        name="funnels.advance",
        payload=b"{}",
        attempts=3,
        error="RuntimeError: the page test's dead job",
    )
    return "pages-dead-job"


async def _dispatch_the_demo_rule(runtime: Runtime, clock: ManualClock) -> None:
    """Switch the demo's draft rule on and let one dispatch run, so the rule log has a batch."""
    async with runtime.db.write() as uow:
        rule = await uow.session.scalar(select(Rule).order_by(Rule.id))
        assert rule is not None
        await adrules_rules.set_status(
            uow.session,
            workspace_id=rule.workspace_id,
            rule_id=rule.id,
            status="active",
            now=clock.now(),
        )
    clock.advance(60)
    runner = SweepRunner(
        runtime.db, clock, [DISPATCH_SWEEP], runtime.context, owner="pages", lease_seconds=60
    )
    assert await runner.run_tick(DISPATCH_SWEEP, clock.now())

    async def batch_finished() -> bool:
        async with runtime.db.read() as s:
            return (
                await s.scalar(select(Batch.id).where(Batch.finished_at.is_not(None)))
            ) is not None

    await eventually(batch_finished, timeout=30)


@pytest.fixture(scope="module")
async def demo(settings: Settings, shared_db: Database) -> AsyncIterator[Demo]:
    """The demo workspace served on a loopback port, its simulators and workers running. Built
    once per test process for the whole module: the tests here only read it."""
    from app.sandbox.base import serve_in_loop

    clock = ManualClock(START)
    handles = start_sandboxes(simulated({}))
    try:
        urls = {name: h.url for name, h in handles.items()}
        demo_settings = settings_for_sandboxes(with_own_queue(settings), urls)
        rt = assemble(demo_settings, clock, db=shared_db)
        try:
            credentials = await ensure_demo(rt, urls)
            password = credentials.password
            await _publish_the_demo_funnel(rt)
            rt.start_workers()
            await _dispatch_the_demo_rule(rt, clock)
            app = create_app(demo_settings, rt, background=False)
            ids = await _demo_ids(rt)
            ids["job_id:str"] = await _a_dead_job(rt, clock)
            async with serve_in_loop(app) as url:
                yield Demo(url, demo_settings.demo.admin_email, password, ids, app)
        finally:
            await rt.stop()
            await rt.resources.aclose()
            await rt.queue.aclose()
            await truncate_all(shared_db)
    finally:
        for handle in handles.values():
            handle.stop()


def page_paths(app: Litestar) -> list[str]:
    """Every GET route a person might open: the dashboard, its sign-in page, nothing programmatic."""
    paths = set()
    for route in app.routes:
        if not isinstance(route, HTTPRoute) or NOT_PAGES.search(route.path):
            continue
        if any("GET" in handler.http_methods for handler in route.route_handlers):
            paths.add(route.path)
    return sorted(paths)


def fill(path: str, ids: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        # A parameter's typed name first: a bulk job's id is an int, a queued job's a string.
        name = match.group(1)
        typed = f"{name}:{match.group(2)}"
        if typed in ids:
            return ids[typed]
        if name not in ids:
            pytest.fail(f"{path}: the page test has no demo object for path parameter {name!r}")
        return ids[name]

    filled = re.sub(r"\{(\w+)(?::(\w+))?\}", value, path)
    if path in QUERIES:
        filled += "?" + urlencode({QUERIES[path]: ids[QUERIES[path]]})
    return filled


@dataclasses.dataclass
class Watch:
    """What went wrong on a page while it loaded: console errors, failed or refused requests."""

    problems: list[str] = dataclasses.field(default_factory=list)

    def attach(self, page: Any) -> None:
        page.on(
            "console",
            lambda m: (
                self.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None
            ),
        )
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on(
            "requestfailed",
            # A request the browser itself abandons because the page is navigated away (the
            # next width's load) is not a failure of the page.
            lambda r: (
                self.problems.append(f"request failed: {r.method} {r.url} {r.failure}")
                if "ERR_ABORTED" not in (r.failure or "")
                else None
            ),
        )
        page.on(
            "response",
            lambda r: (
                self.problems.append(f"HTTP {r.status}: {r.request.method} {r.url}")
                if r.status >= 400
                else None
            ),
        )


AUDIT = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations
    .filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => `${v.impact} ${v.id}: ${v.help} — ` +
         v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '));
}"""

OVERFLOW = """() => {
  const doc = document.documentElement;
  return {scroll: doc.scrollWidth, viewport: window.innerWidth};
}"""


# Playwright's "networkidle" waits for half a second without traffic after every load: about a
# minute of waiting over the whole crawl. Instead the page reports when its own work is done: the
# load event has fired, none of its fetch or XHR calls is open and no short timer (a debounced
# recount, htmx's settle step) is waiting to start one; the browser side adds that every request
# it saw has finished. A timer of half a second or more is polling (htmx "every 1s"), which
# "networkidle" never waited for either.
SETTLED_SCRIPT = """(() => {
  if (window.__pageSettled) return;  // added once per audit of a page that is reused
  const SHORT_MS = 500;
  let open = 0;
  const timers = new Set();
  const setTimer = window.setTimeout, clearTimer = window.clearTimeout;
  window.setTimeout = function (callback, delay, ...args) {
    if (!(Number(delay || 0) < SHORT_MS) || typeof callback !== "function") {
      return setTimer.call(window, callback, delay, ...args);
    }
    const id = setTimer.call(window, function () {
      timers.delete(id);
      return callback.apply(this, arguments);
    }, delay, ...args);
    timers.add(id);
    return id;
  };
  window.clearTimeout = function (id) {
    timers.delete(id);
    return clearTimer.call(window, id);
  };
  const fetchOf = window.fetch;
  window.fetch = function () {
    open++;
    return fetchOf.apply(this, arguments).finally(() => { open--; });
  };
  const send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = function () {
    open++;
    this.addEventListener("loadend", () => { open--; });
    return send.apply(this, arguments);
  };
  window.__pageSettled = () => document.readyState === "complete" && open === 0 && timers.size === 0;
})();"""


async def wait_until_settled(page: Any, in_flight: set[Any], timeout: float = 30.0) -> None:
    """Wait until the page and the browser agree that nothing the page started is still running."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if not in_flight and await page.evaluate("() => window.__pageSettled()") and not in_flight:
            return
        if loop.time() > deadline:
            pending = ", ".join(sorted(r.url for r in in_flight)) or "timers or script requests"
            raise AssertionError(f"{page.url} did not settle in {timeout:.0f} s: {pending}")
        await asyncio.sleep(0.02)


async def audit_page(page: Any, url: str, width: int) -> list[str]:
    """Open ``url`` at ``width`` and list what is wrong with it (nothing, for a clean page)."""
    watch = Watch()
    watch.attach(page)
    in_flight: set[Any] = set()
    page.on("request", lambda r: in_flight.add(r))
    page.on("requestfinished", lambda r: in_flight.discard(r))
    page.on("requestfailed", lambda r: in_flight.discard(r))
    await page.add_init_script(script=SETTLED_SCRIPT)
    await page.set_viewport_size({"width": width, "height": 800})
    response = await page.goto(url, wait_until="load")
    await wait_until_settled(page, in_flight)
    problems = []
    if response is None or response.status != 200:
        problems.append(f"answered {response.status if response else 'nothing'}")
    if width < 600:
        sizes = await page.evaluate(OVERFLOW)
        if sizes["scroll"] > sizes["viewport"]:
            problems.append(
                f"page is {sizes['scroll']} px wide in a {sizes['viewport']} px viewport"
            )
    problems += await page.evaluate(AUDIT)
    return watch.problems + problems


async def audit_context(browser: Any) -> Any:
    context = await browser.new_context()
    await context.add_init_script(path=str(AXE))
    return context


def report_text(report: dict[str, list[str]]) -> str:
    return "\n".join(f"{where}:\n  " + "\n  ".join(problems) for where, problems in report.items())


async def test_the_page_list_really_finds_the_dashboard(demo: Demo) -> None:
    """A broken filter would make the crawl below vacuous."""
    paths = page_paths(demo.app)
    assert "/" in paths
    assert "/login" in paths
    assert "/ui/adrules/rules/{rule_id:int}" in paths
    assert "/ui/organisation/audit" in paths  # the audit log, for the demo's owner
    assert len(paths) > SHARDS


async def test_the_sign_in_page_and_the_icon_are_clean(browser: Any, demo: Demo) -> None:
    """The sign-in page, before signing in; and the icon browsers ask for whatever a page links."""
    context = await audit_context(browser)
    report: dict[str, list[str]] = {}
    try:
        for width in WIDTHS:
            page = await context.new_page()
            try:
                for problem in await audit_page(page, f"{demo.url}/login", width):
                    report.setdefault(f"/login @{width}", []).append(problem)
            finally:
                await page.close()
        for icon_path in ("/favicon.ico", "/static/favicon.svg"):
            icon = await context.request.get(f"{demo.url}{icon_path}")
            assert icon.status == 200, icon_path
            assert icon.headers["content-type"].startswith("image/"), icon_path
    finally:
        await context.close()
    assert not report, report_text(report)


# The crawl is split into shards so that the test processes share it; each shard visits every
# SHARDS-th page of the enumeration, so a new page still lands in one of them.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("shard", range(SHARDS))
async def test_every_page_is_clean_at_desktop_and_phone_widths(
    browser: Any, demo: Demo, shard: int
) -> None:
    paths = [path for path in page_paths(demo.app) if path != "/login"][shard::SHARDS]
    context = await audit_context(browser)
    report: dict[str, list[str]] = {}
    fragments = []
    try:
        page = await context.new_page()
        await sign_in(page, demo.url, demo.email, demo.password)
        await page.close()
        for path in paths:
            url = f"{demo.url}{fill(path, demo.ids)}"
            answer = await context.request.get(url, max_redirects=0)
            body = await answer.text()
            if answer.status == 200 and "<html" not in body[:500].lower():
                fragments.append(path)
                continue
            for width in CRAWL_WIDTHS:
                page = await context.new_page()
                try:
                    for problem in await audit_page(page, url, width):
                        report.setdefault(f"{path} @{width}", []).append(problem)
                finally:
                    await page.close()
    finally:
        await context.close()
    assert not report, report_text(report)
    # The fragments are htmx parts of pages visited above; a page is never mistaken for one.
    assert all(FRAGMENT.search(f) for f in fragments), fragments
