"""Local search geo-grids in the dashboard (RT-125, RT-126): a form to run a scan now (its
estimate shown, its cost reserved like any run), the list of scans, and each scan's heat map:
a plain table of cells coloured by rank, each with its rank as text and labelled with its
place in the grid (no map tiles and no script of its own; works offline and at 375 px). While a
scan is collected its part of the page is refreshed in place every 5 seconds (htmx, as the
schedule page's runs)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, get, post
from litestar.params import FromPath, URLEncodedBody
from litestar.response import Redirect, Template

from app.engines.ranktracking import ledger
from app.engines.ranktracking.amounts import exact_eur
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.local import views
from app.engines.ranktracking.local.geogrid import GRID_SIZES
from app.engines.ranktracking.local.models import ENGINES, GeoGridCell
from app.engines.ranktracking.local.posting import start_and_post
from app.engines.ranktracking.local.scans import estimate_micros, rerun_input
from app.engines.ranktracking.local.schemas import GeoGridIn
from app.engines.ranktracking.pricing import PriceList
from app.errors import DomainError, ValidationFailed
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard.common import page
from app.web.deps import CurrentSettings, Reads, Writes

PREFIX = "/ui/ranktracking/local"


class ScanForm(msgspec.Struct, kw_only=True):
    keyword: str = ""
    business_name: str = ""
    place_id: str = ""
    cid: str = ""
    domain: str = ""
    latitude: str = ""
    longitude: str = ""
    size: str = "5"
    spacing_m: str = "500"
    zoom: str = "15"
    engine: str = "maps"
    language_code: str = "en"


def _number(form: ScanForm, field: str, kind: type[int] | type[float]) -> Any:
    text = getattr(form, field).strip().replace(",", ".")
    try:
        return kind(text)
    except ValueError:
        raise ValidationFailed.field(field, "must be a number") from None


def scan_input(form: ScanForm) -> GeoGridIn:
    """The form as the API's input; a field that is not a number is refused by name."""
    return GeoGridIn(
        keyword=form.keyword,
        business_name=form.business_name or None,
        place_id=form.place_id or None,
        cid=form.cid or None,
        domain=form.domain or None,
        latitude=_number(form, "latitude", float),
        longitude=_number(form, "longitude", float),
        size=_number(form, "size", int),
        spacing_m=_number(form, "spacing_m", int),
        zoom=_number(form, "zoom", int),
        engine=form.engine,
        language_code=form.language_code.strip().lower(),
    )


def rank_class(cell: GeoGridCell) -> str:
    """The heat map's colour of a cell."""
    if cell.rank is not None:
        return "rt-h-top" if cell.rank <= 3 else "rt-h-mid" if cell.rank <= 10 else "rt-h-low"
    return "rt-h-out" if cell.state == "absent" else "rt-h-wait"


def rank_text(cell: GeoGridCell, depth: int) -> str:
    if cell.rank is not None:
        return str(cell.rank)
    return {"absent": f"{depth}+", "failed": "×"}.get(cell.state, "…")


def rank_label(cell: GeoGridCell, depth: int) -> str:
    where = f"Row {cell.row + 1}, column {cell.col + 1}"
    if cell.rank is not None:
        return f"{where}: rank {cell.rank}"
    what = {
        "absent": f"not in the top {depth}",
        "failed": "not measured (the provider did not deliver it)",
    }.get(cell.state, "waiting for the provider")
    return f"{where}: {what}"


async def _index(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
    form: ScanForm | None = None,
    errors: list[str] | None = None,
) -> Template:
    scans = await views.list_scans(session, principal.workspace_id)
    ranks = await views.stats_of(session, [s.id for s in scans])
    balance = await ledger.balance_of(session, principal.organisation_id)
    prices = PriceList.from_settings(settings.ranktracking)
    return page(
        request,
        "ranktracking/local.html",
        principal,
        scans=[views.scan_out(s, ranks[s.id]) for s in scans],
        form=form or ScanForm(),
        errors=errors or [],
        sizes=GRID_SIZES,
        engines=ENGINES,
        unit_eur=exact_eur(estimate_micros(prices, 1, "standard")),
        estimates={n: exact_eur(estimate_micros(prices, n * n, "standard")) for n in GRID_SIZES},
        available_eur=exact_eur(max(0, balance.available_micros)),
        notice=request.query_params.get("notice", ""),
    )


@get(PREFIX)
async def local_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
) -> Template:
    return await _index(request, principal, session, settings)


def _errors(exc: DomainError) -> list[str]:
    if exc.details:
        return [f"{d.get('field', '')}: {d.get('message', '')}" for d in exc.details] + (
            [exc.message] if exc.status == 402 else []
        )
    return [exc.message]


@post(PREFIX)
async def start_scan_form(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    settings: CurrentSettings,
    data: URLEncodedBody[ScanForm],
) -> Template | Redirect:
    """Run a scan now; a refused one shows the form again with what to fix."""
    try:
        scan_id = await start_and_post(
            RankTrackingDeps.of(runtime),
            scan_input(data),
            workspace_id=principal.workspace_id,
            organisation_id=principal.organisation_id,
            user_id=principal.user_id,
        )
    except DomainError as exc:
        async with runtime.db.read() as session:
            template = await _index(request, principal, session, settings, data, _errors(exc))
        template.status_code = exc.status
        return template
    return Redirect(f"{PREFIX}/{scan_id}")


async def _scan_context(session: Reads, workspace_id: int, geogrid_id: int) -> dict[str, Any]:
    scan = await views.get_scan(session, workspace_id, geogrid_id)
    cells = await views.cells_of(session, scan.id)
    ranks = (await views.stats_of(session, [scan.id]))[scan.id]
    rows = [
        [
            {
                "css": rank_class(c),
                "text": rank_text(c, scan.depth),
                "label": rank_label(c, scan.depth),
                "competitors": c.competitors or [],
            }
            for c in cells[r * scan.size : (r + 1) * scan.size]
        ]
        for r in range(scan.size)
    ]
    return {
        "scan": views.scan_out(scan, ranks),
        "rows": rows,
        "running": scan.status in ("reserved", "posting", "collecting"),
        "reserved_eur": exact_eur(scan.reserved_micros),
        "settled_eur": (
            exact_eur(scan.settled_micros) if scan.settled_micros is not None else None
        ),
    }


@get(f"{PREFIX}/{{geogrid_id:int}}")
async def scan_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    geogrid_id: FromPath[int],
) -> Template:
    context = await _scan_context(session, principal.workspace_id, geogrid_id)
    notice = request.query_params.get("notice", "")
    return page(request, "ranktracking/local_scan.html", principal, notice=notice, **context)


@get(f"{PREFIX}/{{geogrid_id:int}}/partials/grid")
async def scan_partial(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    geogrid_id: FromPath[int],
) -> Template:
    """The summary, heat map and competitors, refreshed in place while the scan is collected."""
    context = await _scan_context(session, principal.workspace_id, geogrid_id)
    return page(request, "ranktracking/_local_grid.html", principal, **context)


@post(f"{PREFIX}/{{geogrid_id:int}}/rerun")
async def rerun_scan(
    principal: CurrentPrincipal, runtime: CurrentRuntime, geogrid_id: FromPath[int]
) -> Redirect:
    async with runtime.db.read() as session:
        scan = await views.get_scan(session, principal.workspace_id, geogrid_id)
    try:
        scan_id = await start_and_post(
            RankTrackingDeps.of(runtime),
            rerun_input(scan),
            workspace_id=principal.workspace_id,
            organisation_id=principal.organisation_id,
            user_id=principal.user_id,
        )
    except DomainError as exc:
        return Redirect(f"{PREFIX}/{geogrid_id}?notice={quote(exc.message)}")
    return Redirect(f"{PREFIX}/{scan_id}")


@post(f"{PREFIX}/{{geogrid_id:int}}/delete")
async def delete_scan(
    principal: CurrentPrincipal, uow: Writes, geogrid_id: FromPath[int]
) -> Redirect:
    try:
        async with uow.attempt():
            await views.delete_scan(uow.session, principal.workspace_id, geogrid_id)
    except DomainError as exc:
        if exc.status == 404:
            raise
        return Redirect(f"{PREFIX}/{geogrid_id}?notice={quote(exc.message)}")
    return Redirect(f"{PREFIX}?notice={quote('Scan deleted')}")


ROUTES: list[Any] = [
    local_page,
    start_scan_form,
    scan_page,
    scan_partial,
    rerun_scan,
    delete_scan,
]
