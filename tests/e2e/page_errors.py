"""What went wrong in a page while a browser test used it: console errors, uncaught script errors
and failed requests, as one list a test asserts empty."""

from __future__ import annotations

from typing import Any


class _Navigations:
    """Counts the top-level navigations a page starts, and remembers how many had started when
    each request of the page was sent, so that a failed request can be told apart from one the
    browser dropped because the page moved on (a link followed, a form posted, ``page.goto``)
    before it came back: the browser's housekeeping, not something that went wrong in the page.
    Seen only when the machine is slow enough for the request to still be on its way."""

    def __init__(self, page: Any) -> None:
        self._page = page
        self._started = 0
        self._seen_at: dict[Any, int] = {}
        page.on("request", self._on_request)
        page.on("requestfinished", lambda r: self._seen_at.pop(r, None))

    def _on_request(self, request: Any) -> None:
        if request.is_navigation_request() and request.frame == self._page.main_frame:
            self._started += 1
        self._seen_at[request] = self._started

    def abandoned(self, request: Any) -> bool:
        """``request`` was aborted, and a navigation started after it was sent, or it was the
        browser's own fetch of the page's icon: Chromium drops that one whenever it likes (the
        tab's icon already known, a navigation about to commit that it has not announced yet),
        so its abort says nothing about the page. That the icon is served is tested apart."""
        sent_at = self._seen_at.pop(request, self._started)
        if "ERR_ABORTED" not in (request.failure or ""):
            return False
        return self._started > sent_at or _is_icon(request.url)


def _is_icon(url: str) -> bool:
    return url.split("?", 1)[0].endswith(("/favicon.svg", "/favicon.ico"))


def watch_errors(page: Any) -> list[str]:
    """Start recording ``page``'s errors; the returned list fills as they happen."""
    errors: list[str] = []
    navigations = _Navigations(page)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "requestfailed",
        lambda r: None if navigations.abandoned(r) else errors.append(f"{r.url} {r.failure}"),
    )
    return errors
