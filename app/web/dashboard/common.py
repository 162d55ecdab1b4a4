"""Helpers every dashboard page uses: the page dependencies and the template response."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.response import Template

from app.platform.service import Principal
from app.runtime import Runtime


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
            "nav": request.app.state.nav,
            "path": request.url.path,
            **context,
        },
    )
