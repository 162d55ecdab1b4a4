"""The funnel's experiments and analytics page, served (FN-55 to FN-60): branches with their
figures and verdict, declaring and reverting a winner from the page (recorded in the audit log),
the holdout's lift, the day-by-day chart data for the shared charts script, and the CSV link."""

from __future__ import annotations

import html
import json
import re

from sqlalchemy import select

from app.platform.audit.models import AuditEntry
from tests.engines.funnels.experiments.test_experiments import experiment_graph
from tests.engines.funnels.factories import Engine, bulk_contacts, published, setup_names
from tests.engines.funnels.outbox.test_unsubscribe import _enrol


async def test_fn55_fn56_the_page_shows_the_verdict_and_a_person_declares_and_reverts(
    client, runtime, tenant, engine: Engine
) -> None:
    from tests.platform.conftest import csrf_from, sign_in

    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["seen"])
    funnel_id, _ = await published(runtime, ws, experiment_graph())
    for person in await bulk_contacts(runtime, ws, 30):
        await _enrol(runtime, funnel_id, person)
    await engine.drive()
    await sign_in(client, tenant.email, tenant.password)

    funnel_page = await client.get(f"/ui/funnels/{funnel_id}")
    assert f'href="/ui/funnels/{funnel_id}/experiments"' in funnel_page.text
    # the funnel page charts the last 30 days too (FN-60)
    [daily] = re.findall(r"id=\"daily-chart\"[^>]*data-chart='([^']*)'", funnel_page.text)
    daily_series = {s["label"]: s["values"] for s in json.loads(html.unescape(daily))["series"]}
    assert sum(daily_series["entered"]) == 30
    assert len(daily_series["entered"]) == 30  # one point a day

    page = await client.get(f"/ui/funnels/{funnel_id}/experiments")
    assert page.status_code == 200, page.text
    text = page.text
    assert "<script>" not in text
    assert "style=" not in text
    assert 'data-verdict="winner"' in text
    assert re.search(r"Verdict: (&#39;|&#x27;|')a(&#39;|&#x27;|') wins", text), text[
        text.find("verdict-ab") :
    ][:300]
    [raw] = re.findall(r"data-chart='([^']*)'", text)
    chart = json.loads(html.unescape(raw))
    assert [s["label"] for s in chart["series"]] == ["entered", "waiting", "exited", "converted"]
    assert sum(chart["series"][0]["values"]) == 30
    assert f"/ui/funnels/{funnel_id}/experiments/series.csv?" in text

    token = csrf_from(text)
    declared = await client.post(
        f"/ui/funnels/{funnel_id}/experiments/ab/winner",
        data={"branch": "b", "_csrf_token": token},
    )
    assert declared.status_code in (302, 303), declared.text
    page = await client.get(declared.headers["location"])
    assert 'id="standing-ab">b<' in page.text
    reverted = await client.post(
        f"/ui/funnels/{funnel_id}/experiments/ab/winner/revert",
        data={"_csrf_token": csrf_from(page.text)},
    )
    assert reverted.status_code in (302, 303)
    page = await client.get(reverted.headers["location"])
    assert "Winner reverted" in page.text
    assert 'id="declare-ab"' in page.text
    async with runtime.db.read() as s:
        actions = list(
            await s.scalars(
                select(AuditEntry.action)
                .where(AuditEntry.action.like("funnel_experiment.%"))
                .order_by(AuditEntry.id)
            )
        )
    assert actions == ["funnel_experiment.winner_declared", "funnel_experiment.winner_reverted"]

    csv = await client.get(f"/ui/funnels/{funnel_id}/experiments/series.csv")
    assert csv.status_code == 200
    assert csv.text.startswith("version,node_id,")
    bad = await client.get(f"/ui/funnels/{funnel_id}/experiments?start=2026-13-40")
    assert bad.status_code == 200
    assert "start: a day as YYYY-MM-DD" in bad.text


async def test_fn55_what_the_author_typed_is_shown_as_text(client, runtime, tenant) -> None:
    """A split's label and branch names are escaped wherever the page shows them."""
    from tests.platform.conftest import sign_in

    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["seen"])
    definition = experiment_graph()
    split = definition["nodes"][0]
    split["label"] = "<script>alert(1)</script>"
    split["branches"][0]["name"] = "a'\"><img src=x onerror=alert(2)>"
    funnel_id, _ = await published(runtime, ws, definition)
    await sign_in(client, tenant.email, tenant.password)
    page = await client.get(f"/ui/funnels/{funnel_id}/experiments")
    assert page.status_code == 200
    assert "<script>alert(1)" not in page.text
    assert "<img src=x" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
