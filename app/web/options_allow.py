"""The ``Allow`` of an OPTIONS answer names every method routed on the path.

Litestar gives each route an OPTIONS handler whose ``Allow`` lists the methods of the route that
created it. A path whose handlers are registered one after the other (a GET, then a POST on the
same path) is rebuilt each time as a new route holding the first route's OPTIONS handler, which
still answers with the first route's methods only: ``Allow: GET, OPTIONS`` on a path that takes
POST too. :func:`complete_options_allow` points every such handler at the route it now serves.
"""

from __future__ import annotations

from litestar import Litestar
from litestar.routes import HTTPRoute


def complete_options_allow(app: Litestar) -> None:
    """Make each route's OPTIONS handler read that route's methods; refuse an application where
    Litestar's OPTIONS handler no longer has the shape this relies on."""
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            fn = getattr(handler.fn, "__closure__", None)
            if handler.http_methods != {"OPTIONS"} or handler.fn.__name__ != "options_handler":
                continue
            cells = [c for c in fn or () if isinstance(c.cell_contents, HTTPRoute)]
            if len(cells) != 1:
                raise RuntimeError(f"{route.path}: Litestar's OPTIONS handler changed shape")
            cells[0].cell_contents = route
