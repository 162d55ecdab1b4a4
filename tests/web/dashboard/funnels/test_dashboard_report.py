"""The funnel page shows the report (issue 19 item 4): the latest version's figures per node in a
table and a chart drawn by a static script with the vendored uPlot (the CSP allows scripts from
'self' only), from steps and delivery records; the status separates finished runs from mail
still in the outbox."""

from __future__ import annotations

import html
import json
import re

import httpx

from app.engines.funnels.runs.due.entry import enter
from app.runtime import Runtime
from tests.engines.funnels.factories import Engine, contact, email_node, graph, node, published
from tests.factories import Tenant


async def test_the_funnel_page_charts_the_latest_versions_report(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, engine: Engine
) -> None:
    from tests.platform.conftest import sign_in

    ws = tenant.workspace_id
    funnel_id, version = await published(
        runtime,
        ws,
        graph(
            email_node("hello", subject="Hello", next="w"),
            node("wait", "w", days=2, next="bye"),
            email_node("bye", subject="Bye"),
        ),
    )
    people = [await contact(runtime, ws, f"r{i}@x.test") for i in range(3)]
    async with runtime.db.write() as uow:
        for cid in people:
            await enter(uow.session, version=version, contact_id=cid, now=runtime.clock.now())
    await engine.drive()
    await sign_in(client, tenant.email, tenant.password)

    page = await client.get(f"/ui/funnels/{funnel_id}")
    assert page.status_code == 200
    text = page.text
    for src in ("/static/vendor/uplot/uPlot.iife.min.js", "/static/funnel_report.js"):
        assert f'<script src="{src}" defer></script>' in text
        assert (await client.get(src)).status_code == 200
    assert "<script>" not in text  # nothing inline: the CSP would refuse it
    [raw] = re.findall(r"id=\"funnel-chart\"[^>]*data-chart='([^']*)'", text)
    chart = json.loads(html.unescape(raw))
    assert chart["labels"] == ["hello", "w", "bye"]
    series = {s["label"]: s["values"] for s in chart["series"]}
    assert series["entered"] == [3, 3, 0]
    assert series["waiting"] == [0, 3, 0]
    assert series["sent"] == [3, None, 0]
    assert "Status: <strong>running</strong> — 3 run(s) active, 0 message(s)" in text
    assert re.search(r'<tr data-node="hello">.*?<td>3</td>', text, re.S)
