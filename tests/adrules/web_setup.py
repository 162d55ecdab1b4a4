"""The app with the rule-log, preview and template routes mounted (they are wired into the engine's
API and dashboard modules by the composition root; tests mount them themselves until then, and skip
mounting what is already there)."""

from __future__ import annotations

from typing import Any

from litestar import Litestar, Router
from litestar.di import Provide

from app.runtime import Runtime
from app.settings import Settings
from app.web.api import adrules_runs
from app.web.auth import provide_runtime, ui_principal
from app.web.dashboard import adrules_log


def _paths(app: Litestar) -> set[str]:
    return {route.path for route in app.routes}


def app_with_worker_routes(settings: Settings, runtime: Runtime) -> Litestar:
    from app.web.app import create_app

    app = create_app(settings, runtime, background=False)
    have = _paths(app)
    if "/api/v1/adrules/batches/{batch_record_id:int}/records" not in have:
        for router in adrules_runs.ROUTERS:
            app.register(router)
    if "/ui/adrules/log" not in have:
        pages: Any = Router(
            path="/",
            route_handlers=adrules_log.ROUTES,
            dependencies={"principal": Provide(ui_principal), "runtime": Provide(provide_runtime)},
            include_in_schema=False,
        )
        app.register(pages)
    return app
