"""Position alerts (issue 15, item 7): rules per schedule evaluated by a job when a measured
request ends, each alert sent once per run — by e-mail at a real SMTP server, or as a webhook
signed with the rule's secret to a loopback receiver — however often the evaluation runs or
whatever dies mid-way; every field of a rule checked (422, nothing written)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from litestar import Litestar, Request, post
from sqlalchemy import select, update

from app.engines.ranktracking.alert_models import AlertDelivery, AlertRule
from app.engines.ranktracking.alerts import deliver
from app.engines.ranktracking.alerts.decide import Movement, fires
from app.engines.ranktracking.alerts.deliver import deliver_impl
from app.engines.ranktracking.alerts.evaluate import evaluate_impl
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Activity, Run
from app.integrations.http_guard import GUARD_RESOURCE, AddressGuard
from app.integrations.http_guard.signature import SIGNATURE_HEADER, verify_webhook
from app.integrations.mail import TransientMailError
from app.platform.models import Workspace
from app.runtime import Runtime
from app.sandbox.base import serve_in_loop
from app.sandbox.serp import SerpSimulator
from app.sandbox.smtp import SmtpSink
from tests.conftest import auth, eventually
from tests.engines.ranktracking.factories import KEYWORDS, PLAN, fund, make_schedule, measure
from tests.factories import Tenant

API = "/api/v1/ranktracking"


async def _schedule(runtime: Runtime, tenant: Tenant) -> int:
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(
        runtime, tenant, keywords=KEYWORDS, devices=["desktop", "mobile"]
    )
    return schedule.id


async def _request_of(runtime: Runtime, run_ids: list[int]) -> int:
    async with runtime.db.read() as session:
        run = await session.get(Run, run_ids[0])
        assert run is not None
        return run.request_id


async def _deliveries(runtime: Runtime) -> list[AlertDelivery]:
    async with runtime.db.read() as session:
        return list(
            (await session.execute(select(AlertDelivery).order_by(AlertDelivery.id))).scalars()
        )


def test_what_fires_a_rule() -> None:
    assert fires("enters_top", 3, Movement("k", "desktop", 5, 2))
    assert fires("enters_top", 3, Movement("k", "desktop", None, 3))
    assert not fires("enters_top", 3, Movement("k", "desktop", 2, 1))  # already in
    assert fires("leaves_top", 10, Movement("k", "mobile", 3, None))  # beyond the depth
    assert fires("leaves_top", 3, Movement("k", "mobile", 3, 4))
    assert not fires("leaves_top", 3, Movement("k", "mobile", 4, 5))
    assert fires("moves", 3, Movement("k", "mobile", 9, 6))
    assert fires("moves", 3, Movement("k", "mobile", 2, 5))
    assert not fires("moves", 3, Movement("k", "mobile", 2, 4))
    assert not fires("moves", 1, Movement("k", "mobile", None, 4))  # entries are not moves


async def test_an_email_alert_fires_once_per_run_at_a_real_smtp_server(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,
    sink: SmtpSink,
) -> None:
    schedule_id = await _schedule(runtime, tenant)
    r = await client.post(
        f"{API}/schedules/{schedule_id}/alerts",
        json={
            "name": "Into the top 3",
            "kind": "enters_top",
            "threshold": 3,
            "channel": "email",
            "recipients": ["seo@example.com", " SEO@example.com "],
        },
        headers=auth(tenant),
    )
    assert r.status_code == 201, r.text
    assert r.json()["recipients"] == ["seo@example.com"]
    await measure(runtime, sim, schedule_id, PLAN[0])  # the baseline: nothing to compare with
    runtime.clock.advance(days=7)  # type: ignore[attr-defined]
    second = await _request_of(runtime, await measure(runtime, sim, schedule_id, PLAN[1]))
    runtime.clock.advance(days=7)  # type: ignore[attr-defined]
    third = await _request_of(runtime, await measure(runtime, sim, schedule_id, PLAN[2]))

    # The runs' ends queued the evaluations; the workers run them and send what fired.
    runtime.start_workers()

    async def both_sent() -> bool:
        return [d.state for d in await _deliveries(runtime)] == ["sent", "sent"]

    await eventually(both_sent, timeout=30)
    await runtime.stop()
    messages = sink.snapshot()
    assert len(messages) == 2
    assert all(m.to == ["seo@example.com"] for m in messages)
    assert sorted(m.subject for m in messages) == [
        "Positions: 1 keyword enters the top 3",
        "Positions: 2 keywords enter the top 3",
    ]
    bodies = " ".join(m.body for m in messages)
    assert "red shoes (desktop): 5 → 2" in bodies  # the second run
    assert "red shoes (mobile): 6 → 1" in bodies  # the third, with
    assert "green shoes (mobile): – → 2" in bodies  # beyond the depth before
    assert f"/ui/ranktracking/schedules/{schedule_id}" in bodies
    assert "acme-shop.com, United States)" in bodies  # RT-63: the location by name
    assert sorted(d.request_id for d in await _deliveries(runtime)) == [second, third]

    # Evaluating again, or running a delivery again, sends nothing twice.
    assert await evaluate_impl(RankTrackingDeps.of(runtime), second) == 0
    assert await evaluate_impl(RankTrackingDeps.of(runtime), third) == 0
    for delivery in await _deliveries(runtime):
        assert (
            await deliver_impl(RankTrackingDeps.of(runtime), delivery.id, final_attempt=False)
            is None
        )
    assert len(sink.snapshot()) == 2

    # Visible in the activity feed and in the API.
    async with runtime.db.read() as session:
        feed = list(
            (await session.execute(select(Activity).where(Activity.kind == "alert_sent"))).scalars()
        )
    assert len(feed) == 2
    assert all('"Into the top 3"' in a.message and "by e-mail" in a.message for a in feed)
    r = await client.get(f"{API}/schedules/{schedule_id}/alerts/deliveries", headers=auth(tenant))
    assert [d["state"] for d in r.json()["items"]] == ["sent", "sent"]
    assert r.json()["items"][0]["matches"] == [
        {"keyword": "green shoes", "device": "mobile", "previous": None, "current": 2},
        {"keyword": "red shoes", "device": "mobile", "previous": 6, "current": 1},
    ]


async def test_a_signed_webhook_alert_is_sent_once_even_after_a_crash_mid_way(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    received: list[tuple[bytes, dict[str, str]]] = []

    @post("/hook", status_code=204)
    async def hook(request: Request[Any, Any, Any]) -> None:
        received.append((await request.body(), dict(request.headers)))

    async with runtime.db.write() as uow:  # the receiver is on loopback: the workspace allows it
        await uow.session.execute(
            update(Workspace)
            .where(Workspace.id == tenant.workspace_id)
            .values(allow_private_http=True)
        )
    secret = "rt-alert-secret-0123456789"
    schedule_id = await _schedule(runtime, tenant)
    async with serve_in_loop(Litestar([hook])) as url:
        r = await client.post(
            f"{API}/schedules/{schedule_id}/alerts",
            json={
                "name": "Big moves",
                "kind": "moves",
                "threshold": 3,
                "channel": "webhook",
                "url": f"{url}/hook",
                "secret": secret,
            },
            headers=auth(tenant),
        )
        assert r.status_code == 201, r.text
        rule = r.json()
        assert rule["has_secret"] is True
        assert "secret" not in rule
        await measure(runtime, sim, schedule_id, PLAN[1])
        runtime.clock.advance(days=7)  # type: ignore[attr-defined]
        request_id = await _request_of(runtime, await measure(runtime, sim, schedule_id, PLAN[2]))

        assert await evaluate_impl(RankTrackingDeps.of(runtime), request_id) == 1
        (delivery,) = await _deliveries(runtime)
        assert delivery.matches == [
            {"keyword": "red shoes", "device": "mobile", "previous": 6, "current": 1}
        ]
        # A sender claims it and dies before sending: the claim holds the alert until its lease
        # runs out, then the next attempt sends it — once.
        now = runtime.clock.now()
        assert await deliver.CLAIM.take(
            runtime.db, now=now, limit=1, lease_seconds=60, delivery_id=delivery.id
        )
        assert (
            await deliver_impl(RankTrackingDeps.of(runtime), delivery.id, final_attempt=False)
            is None
        )
        assert received == []
        runtime.clock.advance(seconds=61)  # type: ignore[attr-defined]
        assert (
            await evaluate_impl(RankTrackingDeps.of(runtime), request_id) == 0
        )  # re-run: nothing new
        assert (
            await deliver_impl(RankTrackingDeps.of(runtime), delivery.id, final_attempt=False)
            == "sent"
        )
        assert (
            await deliver_impl(RankTrackingDeps.of(runtime), delivery.id, final_attempt=False)
            is None
        )
        assert await evaluate_impl(RankTrackingDeps.of(runtime), request_id) == 0

    assert len(received) == 1
    body, headers = received[0]
    signature = headers[SIGNATURE_HEADER.lower()]
    now_unix = int(runtime.clock.now().timestamp())
    assert verify_webhook(secret, signature, body, now=now_unix)
    assert not verify_webhook("another-secret-of-16", signature, body, now=now_unix)
    assert not verify_webhook(secret, signature, body + b" ", now=now_unix)
    assert headers["idempotency-key"] == f"rt-alert:{rule['id']}:{request_id}"
    payload = httpx.Response(200, content=body).json()
    assert payload["event"] == "ranktracking.alert"
    assert payload["rule"]["kind"] == "moves"
    assert (payload["schedule"]["location_code"], payload["schedule"]["location_name"]) == (
        2840,
        "United States",
    )  # RT-63
    assert payload["matches"] == [
        {"keyword": "red shoes", "device": "mobile", "previous": 6, "current": 1}
    ]
    (delivery,) = await _deliveries(runtime)
    assert (delivery.state, delivery.attempts) == ("sent", 2)


async def test_alert_rules_are_checked_field_by_field(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    schedule_id = await _schedule(runtime, tenant)
    path = f"{API}/schedules/{schedule_id}/alerts"
    base = {
        "name": "Top 10",
        "kind": "enters_top",
        "threshold": 10,
        "recipients": ["a@example.com"],
    }

    async def refused(body: dict[str, Any], field: str) -> None:
        r = await client.post(path, json=body, headers=auth(tenant))
        assert r.status_code == 422, (body, r.text)
        assert field in r.text, r.text

    await refused({**base, "kind": "sometimes"}, "kind")
    await refused({**base, "threshold": 0}, "threshold")
    await refused({**base, "threshold": 50}, "threshold")  # the schedule measures the top 10
    await refused({**base, "recipients": []}, "recipients")
    await refused({**base, "recipients": ["not an address"]}, "recipients[0]")
    await refused({**base, "device": "tablet"}, "device")
    await refused({**base, "channel": "webhook", "recipients": []}, "url")
    await refused({**base, "channel": "webhook", "url": "https://hooks.example.com/x"}, "secret")
    await refused(
        {**base, "channel": "webhook", "url": "ftp://hooks.example.com/x", "secret": "s" * 16},
        "url",
    )
    runtime.resources.put(GUARD_RESOURCE, AddressGuard())  # as in production: nothing private
    await refused(
        {**base, "channel": "webhook", "url": "http://127.0.0.1:9/x", "secret": "s" * 16}, "url"
    )
    async with runtime.db.read() as session:
        assert (await session.execute(select(AlertRule))).first() is None

    r = await client.post(path, json=base, headers=auth(tenant))
    assert r.status_code == 201
    rule_id = r.json()["id"]
    other = await client.get(path, headers=auth(other_tenant))
    assert other.status_code == 404
    r = await client.put(
        f"{path}/{rule_id}", json={**base, "threshold": 3, "enabled": False}, headers=auth(tenant)
    )
    assert (r.status_code, r.json()["threshold"], r.json()["enabled"]) == (200, 3, False)
    assert (await client.delete(f"{path}/{rule_id}", headers=auth(other_tenant))).status_code == 404
    assert (await client.delete(f"{path}/{rule_id}", headers=auth(tenant))).status_code == 204
    assert (await client.get(path, headers=auth(tenant))).json()["items"] == []
    assert (await client.delete(f"{path}/{rule_id}", headers=auth(tenant))).status_code == 404


async def test_a_deferred_alert_is_retried_and_a_refused_one_fails(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,
    sink: SmtpSink,
) -> None:
    schedule_id = await _schedule(runtime, tenant)
    for name, kind in (("Big moves", "moves"), ("Into the top 3", "enters_top")):
        r = await client.post(
            f"{API}/schedules/{schedule_id}/alerts",
            json={
                "name": name,
                "kind": kind,
                "threshold": 3,
                "channel": "email",
                "recipients": ["seo@example.com"],
            },
            headers=auth(tenant),
        )
        assert r.status_code == 201, r.text
    await measure(runtime, sim, schedule_id, PLAN[1])
    runtime.clock.advance(days=7)  # type: ignore[attr-defined]
    request_id = await _request_of(runtime, await measure(runtime, sim, schedule_id, PLAN[2]))
    deps = RankTrackingDeps.of(runtime)
    assert await evaluate_impl(deps, request_id) == 2
    moves, top = await _deliveries(runtime)

    # A 4xx deferral is the queue's to retry: raised, the claim given back with the reason.
    sink.inject_failure(451)
    with pytest.raises(TransientMailError):
        await deliver_impl(deps, moves.id, final_attempt=False)
    (moves, top) = await _deliveries(runtime)
    assert (moves.state, moves.lease_until) == ("pending", None)
    assert moves.error is not None
    assert moves.error.startswith("SMTP 451")
    # On the job's last attempt the same deferral fails the alert.
    sink.inject_failure(451)
    assert await deliver_impl(deps, moves.id, final_attempt=True) == "failed"
    # A 5xx refusal fails the other alert at once, with attempts left.
    sink.inject_failure(550)
    assert await deliver_impl(deps, top.id, final_attempt=False) == "failed"

    assert [(d.state, d.attempts) for d in await _deliveries(runtime)] == [
        ("failed", 2),
        ("failed", 1),
    ]
    assert sink.snapshot() == []
    async with runtime.db.read() as session:
        failed = list(
            (
                await session.execute(
                    select(Activity.message)
                    .where(Activity.kind == "alert_failed")
                    .order_by(Activity.id)
                )
            ).scalars()
        )
    assert [m.split("failed: ")[1][:8] for m in failed] == ["SMTP 451", "SMTP 550"]
