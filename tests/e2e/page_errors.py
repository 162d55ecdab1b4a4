"""What went wrong in a page while a browser test used it: console errors, uncaught script errors
and failed requests, as one list a test asserts empty."""

from __future__ import annotations

from typing import Any


def _abandoned_icon(request: Any) -> bool:
    """The browser's own favicon fetch, dropped because the page moved on (a form posted, a link
    followed) before it came back: the browser's housekeeping, not something the page asked for.
    Seen only when the machine is slow enough for the icon to still be on its way."""
    path = request.url.split("?", 1)[0]
    return path.endswith(("/favicon.svg", "/favicon.ico")) and "ERR_ABORTED" in (
        request.failure or ""
    )


def watch_errors(page: Any) -> list[str]:
    """Start recording ``page``'s errors; the returned list fills as they happen."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "requestfailed",
        lambda r: None if _abandoned_icon(r) else errors.append(f"{r.url} {r.failure}"),
    )
    return errors
