"""The Local grids page (RT-127): the form runs a scan now, a refused one shows the form again
naming the field, the heat map is a plain table whose every cell carries its rank as text and a
label, the page loads nothing from elsewhere and no inline script, and the rank-tracking
navigation links to it."""

from __future__ import annotations

import re

import httpx

from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.engines.ranktracking.factories import fund
from tests.engines.ranktracking.local.helpers import PARIS, PLACE_ID, finish, place
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, sign_in

PAGE = "/ui/ranktracking/local"


def _form(csrf: str, **overrides: str) -> dict[str, str]:
    form = {
        "_csrf_token": csrf,
        "keyword": "boulangerie",
        "place_id": PLACE_ID,
        "latitude": str(PARIS[0]),
        "longitude": str(PARIS[1]),
        "size": "3",
        "spacing_m": "500",
        "zoom": "15",
        "engine": "local_finder",
        "language_code": "fr",
    }
    form.update(overrides)
    return form


async def test_rt127_form_runs_a_scan_and_the_heat_map_reads_as_text(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-127: run from the form, collected, the scan page shows a 3×3 heat map: each cell its
    rank (or "20+") as text, coloured by a class, labelled with its row and column; average and
    top-3 share; no script of its own, nothing from another origin."""
    place(sim, 2)
    await fund(runtime, tenant, 100)
    await sign_in(client, tenant.email, tenant.password)
    overview = await client.get("/ui/ranktracking")
    assert f'href="{PAGE}"' in overview.text
    empty = await client.get(PAGE)
    assert empty.status_code == 200
    assert "No scan yet." in empty.text
    assert "9 searches" in empty.text

    r = await client.post(PAGE, data=_form(csrf_from(empty.text)))
    assert r.status_code in (302, 303), r.text
    scan_path = r.headers["location"]
    scan_id = int(scan_path.rsplit("/", 1)[1])
    running = await client.get(scan_path)
    partial = f'hx-get="{scan_path}/partials/grid"'
    assert partial in running.text
    assert 'id="rt-local-status">collecting<' in running.text

    await finish(runtime, scan_id)
    refreshed = (await client.get(f"{scan_path}/partials/grid")).text
    assert 'id="rt-local-status">done<' in refreshed
    assert partial not in refreshed
    html = (await client.get(scan_path)).text
    assert partial not in html
    cells = re.findall(
        r'<td class="(rt-h-[a-z]+)" title="([^"]+)"><span aria-hidden="true">'
        r'([^<]+)</span><span class="sr-only">([^<]+)</span></td>',
        html,
    )
    assert len(cells) == 9
    assert cells[4] == ("rt-h-top", "Row 2, column 2: rank 2", "2", "Row 2, column 2: rank 2")
    assert cells[0][2] == "3"
    assert cells[0][1] == "Row 1, column 1: rank 3"
    assert 'id="rt-local-average">2.89<' in html
    assert 'id="rt-local-top3">100 %<' in html
    assert "<script" not in html.split("</nav>", 1)[-1].split("</main>", 1)[0]
    assert not re.search(r'(src|href)="https?://', html)
    listing = (await client.get(PAGE)).text
    assert f'href="{PAGE}/{scan_id}"' in listing
    assert "2.89" in listing


async def test_rt127_refused_form_names_the_field_and_keeps_the_input(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-127: a latitude that is not a number, a grid of 4, a balance too short for 9×9: the
    form comes back with the reason naming the field and what was typed, nothing posted."""
    await fund(runtime, tenant, 1)
    await sign_in(client, tenant.email, tenant.password)
    csrf = csrf_from((await client.get(PAGE)).text)
    r = await client.post(PAGE, data=_form(csrf, latitude="north", keyword="pain frais"))
    assert r.status_code == 422
    assert "latitude: must be a number" in r.text
    assert 'value="pain frais"' in r.text
    r = await client.post(PAGE, data=_form(csrf, size="4"))
    assert r.status_code == 422
    assert "size: must be one of 3, 5, 7, 9" in r.text
    r = await client.post(PAGE, data=_form(csrf, size="9"))
    assert r.status_code == 402
    assert "estimated at" in r.text
    assert "top up first" in r.text
    assert sim.count("local_finder.task_post") == 0
