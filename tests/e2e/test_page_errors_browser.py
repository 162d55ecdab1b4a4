"""The browser tests' error watch: a request the browser drops because the page moved on is not
an error of the page; the same request aborted while the page stays is, as is one that fails."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.e2e.page_errors import watch_errors

pytestmark = pytest.mark.browser

ORIGIN = "http://pages.test"
PAGE = """<!doctype html><title>t</title><script>
  window.slow = fetch('/slow').catch(() => {});
  window.stopped = new AbortController();
  window.dropStopped = () => fetch('/slow', {signal: window.stopped.signal}).catch(() => {});
</script>"""


async def serve_pages(page: Any) -> None:
    """``/`` and ``/next`` answer at once; ``/slow`` never answers; ``/gone`` fails."""

    async def answer(route: Any) -> None:
        path = route.request.url.removeprefix(ORIGIN)
        if path == "/slow":
            return  # left hanging until the browser gives it up
        if path == "/gone":
            await route.abort("connectionrefused")
            return
        await route.fulfill(status=200, content_type="text/html", body=PAGE)

    await page.route(f"{ORIGIN}/**", answer)


async def test_a_request_dropped_by_a_navigation_is_not_an_error(page: Any) -> None:
    await serve_pages(page)
    errors = watch_errors(page)
    await page.goto(f"{ORIGIN}/")
    await page.goto(f"{ORIGIN}/next")  # /slow is still on its way
    await page.wait_for_load_state()
    assert errors == []


async def test_a_request_aborted_while_the_page_stays_is_an_error(page: Any) -> None:
    await serve_pages(page)
    errors = watch_errors(page)
    await page.goto(f"{ORIGIN}/")
    async with page.expect_event("requestfailed"):
        await page.evaluate("window.dropStopped(); window.stopped.abort()")
    assert [e.split(" ", 1)[0] for e in errors] == [f"{ORIGIN}/slow"]


async def test_the_browser_dropping_the_page_icon_is_not_an_error(page: Any) -> None:
    """Chromium aborts its own icon fetch when it likes; an icon that fails otherwise counts."""
    await serve_pages(page)
    await page.route(f"{ORIGIN}/favicon.svg", lambda route: route.abort("aborted"))
    await page.route(f"{ORIGIN}/static/favicon.svg", lambda route: route.abort("failed"))
    errors = watch_errors(page)
    await page.goto(f"{ORIGIN}/")
    for icon in ("/favicon.svg", "/static/favicon.svg"):
        async with page.expect_event("requestfailed"):
            await page.evaluate(f"fetch('{icon}').catch(() => {{}})")
    await asyncio.sleep(0)
    failed = [e.split(" ", 1)[0] for e in errors if e.startswith(ORIGIN)]
    assert failed == [f"{ORIGIN}/static/favicon.svg"]


async def test_a_failed_request_is_an_error(page: Any) -> None:
    await serve_pages(page)
    errors = watch_errors(page)
    await page.goto(f"{ORIGIN}/")
    async with page.expect_event("requestfailed"):
        await page.evaluate("fetch('/gone').catch(() => {})")
    await asyncio.sleep(0)
    assert any(e.startswith(f"{ORIGIN}/gone ") for e in errors)
