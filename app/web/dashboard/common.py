"""Helpers every dashboard page uses: the template response and errors worded for people."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.response import Template

from app.errors import DomainError
from app.platform.service import Principal
from app.runtime import Runtime
from app.web.auth import signed_in_workspaces
from app.web.plain_errors import Labels, plain_error, sentence


def page(
    request: Request[Any, Any, Any],
    template: str,
    principal: Principal | None,
    **context: Any,
) -> Template:
    runtime: Runtime = request.app.state.runtime
    return Template(
        template_name=template,
        context={
            "principal": principal,
            "platform_stop": runtime.platform_stopped(),
            "demo_mode": runtime.settings.demo.enabled,
            "nav": request.app.state.nav,
            "path": request.url.path,
            "workspace_menu": signed_in_workspaces(request) if principal else [],
            "switch_next": section_of(request.url.path, request.app.state.nav),
            **context,
        },
    )


_SETTINGS_PAGES = ("/ui/workspace", "/ui/organisation")


def section_of(path: str, nav: list[tuple[str, str]]) -> str:
    """Where the header's workspace switch lands: the same page when it names no object, else
    its navigation entry (``/ui/funnels/12`` gives ``/ui/funnels``), since the object belongs to
    the workspace being left; the home page when no entry holds the page."""
    if not any(part.isdigit() for part in path.split("/")):
        return path
    hrefs = [href for href, _ in nav] + list(_SETTINGS_PAGES)
    holding = [h for h in hrefs if path == h or path.startswith(h.rstrip("/") + "/")]
    return max(holding, key=len) if holding else "/"


def error_messages(exc: DomainError, labels: Labels) -> list[str]:
    """The error as a person reads it: each field named by its label on the form, not by the
    request path the service reports (``fields[0].key`` becomes ``Fields``).

    ``labels`` maps a field's path (``fields.company``, indices left out) or its top-level name
    to the form's label; unlisted names are spelled out. The wording is the one policy of
    ``app.web.plain_errors``.
    """
    if not exc.details:
        return [exc.message]
    messages = []
    for detail in exc.details:
        if not isinstance(detail, dict):
            continue
        text = str(detail.get("message") or exc.message)
        field = str(detail.get("field") or "")
        messages.append(plain_error(field, text, labels) if field else sentence(text))
    return messages or [exc.message]


def error_message(exc: DomainError, labels: Labels) -> str:
    return " ".join(error_messages(exc, labels))
