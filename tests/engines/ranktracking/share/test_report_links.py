"""Shared read-only report links (RT-113..RT-118) and the workspace's logo on reports (RT-119,
RT-120): made, listed and revoked through the API and the dashboard, opened without a session,
expiring on the clock, stored only as a hash, and never showing another workspace."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import select, text

from app.clock import ManualClock
from app.engines.ranktracking.alert_models import ReportDelivery
from app.engines.ranktracking.alerts.report import claim_due, send_report_impl
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.reports.png_chart import Series, line_chart
from app.engines.ranktracking.share_models import ReportLink
from app.platform import logos
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from app.sandbox.smtp import SmtpSink
from tests.conftest import auth
from tests.engines.ranktracking.factories import KEYWORDS, PLAN, fund, make_schedule, measure
from tests.factories import Tenant
from tests.harness.mail import parsed, parts
from tests.platform.conftest import csrf_from, sign_in

API = "/api/v1/ranktracking"
LOGO = line_chart([Series((200, 30, 30), [1.0, 2.0])], low=0.0, high=3.0, inverted=False)


async def _measured(runtime: Runtime, sim: SerpSimulator, tenant: Tenant, **overrides: Any) -> int:
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(runtime, tenant, keywords=KEYWORDS, **overrides)
    await measure(runtime, sim, schedule.id, PLAN[0])
    runtime.clock.advance(days=1)  # type: ignore[attr-defined]
    await measure(runtime, sim, schedule.id, PLAN[1])
    return schedule.id


async def _set_logo(runtime: Runtime, tenant: Tenant, data: bytes = LOGO) -> None:
    async with runtime.db.write() as uow:
        await logos.put_logo(
            uow.session,
            workspace_id=tenant.workspace_id,
            organisation_id=tenant.organisation_id,
            data=data,
            now=runtime.clock.now(),
        )


async def _create(
    client: httpx.AsyncClient, tenant: Tenant, schedule_id: int, days: int = 30
) -> Any:
    r = await client.post(
        f"{API}/schedules/{schedule_id}/share-links", json={"days": days}, headers=auth(tenant)
    )
    assert r.status_code == 201, r.text
    return r.json()


def _path(url: str) -> str:
    return "/" + url.split("/", 3)[3]


async def test_rt113_a_link_opens_the_report_without_a_session(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-113, RT-119: the page shows the workspace's name and logo, the positions table and the
    charts, with no-referrer and noindex, and loads nothing from elsewhere."""
    schedule_id = await _measured(runtime, sim, tenant, name="Shoes <&>")
    await _set_logo(runtime, tenant)
    made = await _create(client, tenant, schedule_id, days=7)
    assert made["state"] == "active"
    assert made["days"] == 7
    assert made["url"].startswith("http")
    assert "/shared/ranktracking/swr_" in made["url"]

    r = await client.get(_path(made["url"]))  # no credentials at all
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert r.headers["referrer-policy"] == "no-referrer"
    assert "noindex" in r.headers["x-robots-tag"]
    assert "script-src 'self'" in r.headers["content-security-policy"]
    page = r.text
    assert "Acme main</p>" in page
    assert 'logo" height="48"' in page
    assert page.count("data:image/png;base64,") == 3  # the logo and two charts
    assert "cid:" not in page
    assert "<script" not in page
    assert 'id="rt-shared-positions"' in page
    for keyword in KEYWORDS:
        assert keyword in page
    assert "Shoes &lt;&amp;&gt;" in page  # customer text escaped
    assert "/ui/ranktracking" not in page  # no link into the dashboard


async def test_rt114_the_token_is_stored_only_as_a_hash(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    schedule_id = await _measured(runtime, sim, tenant)
    made = await _create(client, tenant, schedule_id)
    token = made["url"].rsplit("/", 1)[1]
    async with runtime.db.read() as session:
        (row,) = (await session.execute(select(ReportLink))).scalars()
        dumped = " ".join(
            str(v) for v in (await session.execute(text("SELECT * FROM rt_report_links"))).one()
        )
    assert token not in dumped
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    listed = (
        await client.get(f"{API}/schedules/{schedule_id}/share-links", headers=auth(tenant))
    ).json()["items"]
    assert [item["url"] for item in listed] == [None]  # the address is never shown again
    assert listed[0]["prefix"] == token[:12]


async def test_rt115_expired_revoked_and_unknown_links_are_one_404(
    client: httpx.AsyncClient,
    runtime: Runtime,
    clock: ManualClock,
    tenant: Tenant,
    sim: SerpSimulator,
) -> None:
    """RT-115, RT-116: expiry follows the clock; revocation is at once; the three answers are
    byte for byte the same page."""
    schedule_id = await _measured(runtime, sim, tenant)
    week = await _create(client, tenant, schedule_id, days=7)
    month = await _create(client, tenant, schedule_id, days=30)
    clock.advance(days=6, hours=23)
    assert (await client.get(_path(week["url"]))).status_code == 200
    clock.advance(hours=1)
    expired = await client.get(_path(week["url"]))
    assert expired.status_code == 404
    assert (await client.get(_path(month["url"]))).status_code == 200

    r = await client.delete(
        f"{API}/schedules/{schedule_id}/share-links/{month['id']}", headers=auth(tenant)
    )
    assert r.status_code == 204, r.text
    revoked = await client.get(_path(month["url"]))
    unknown = await client.get("/shared/ranktracking/swr_" + "x" * 43)
    garbage = await client.get("/shared/ranktracking/nothing")
    for answer in (revoked, unknown, garbage):
        assert answer.status_code == 404
        assert answer.text == expired.text
        assert answer.headers["referrer-policy"] == "no-referrer"
        assert "noindex" in answer.headers["x-robots-tag"]
    states = {
        item["id"]: item["state"]
        for item in (
            await client.get(f"{API}/schedules/{schedule_id}/share-links", headers=auth(tenant))
        ).json()["items"]
    }
    assert states == {week["id"]: "expired", month["id"]: "revoked"}
    # Revoking again changes nothing.
    r = await client.delete(
        f"{API}/schedules/{schedule_id}/share-links/{month['id']}", headers=auth(tenant)
    )
    assert r.status_code == 204


async def test_rt117_another_workspaces_schedule_and_link_answer_404(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    other_tenant: Tenant,
    sim: SerpSimulator,
) -> None:
    """RT-117: tenancy; and a link shows only its own workspace's name and data."""
    ours = await _measured(runtime, sim, tenant)
    theirs = await make_schedule(
        runtime, other_tenant, name="Globex secret", keywords=["globexclusive gadgets"]
    )
    mine = await _create(client, tenant, ours)
    foreign = await _create(client, other_tenant, theirs.id)
    for method, path, body in (
        ("POST", f"{API}/schedules/{theirs.id}/share-links", {"days": 7}),
        ("GET", f"{API}/schedules/{theirs.id}/share-links", None),
        ("DELETE", f"{API}/schedules/{theirs.id}/share-links/{foreign['id']}", None),
        ("DELETE", f"{API}/schedules/{ours}/share-links/{foreign['id']}", None),
    ):
        r = await client.request(method, path, json=body, headers=auth(tenant))
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["code"].endswith("not_found")
    assert (await client.get(_path(foreign["url"]))).status_code == 200  # not revoked
    page = (await client.get(_path(mine["url"]))).text
    assert "Globex" not in page
    assert "globexclusive" not in page


async def test_rt118_bad_input_is_a_422_and_read_keys_cannot_share(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    schedule_id = await _measured(runtime, sim, tenant)
    for body in ({"days": 10}, {"days": 0}, {"days": 30, "extra": 1}):
        r = await client.post(
            f"{API}/schedules/{schedule_id}/share-links", json=body, headers=auth(tenant)
        )
        assert r.status_code in (400, 422), (body, r.text)


async def test_rt118_members_see_links_but_only_admins_make_or_revoke_them(
    new_client: Any, client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    schedule_id = await _measured(runtime, sim, tenant)
    made = await _create(client, tenant, schedule_id)
    member = await new_client()
    await sign_in(member, tenant.member_email, tenant.member_password)
    page = await member.get(f"/ui/ranktracking/schedules/{schedule_id}")
    assert page.status_code == 200
    assert 'id="rt-share-links"' in page.text
    assert 'id="rt-share-form"' not in page.text
    token = csrf_from(page.text)
    base = f"/ui/ranktracking/schedules/{schedule_id}/share"
    r = await member.post(base, data={"days": "30", "_csrf_token": token})
    assert r.status_code == 403
    r = await member.post(f"{base}/{made['id']}/revoke", data={"_csrf_token": token})
    assert r.status_code == 403
    assert (await client.get(_path(made["url"]))).status_code == 200


async def test_rt118_the_dashboard_shows_the_link_once_and_revokes_it(
    new_client: Any, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    schedule_id = await _measured(runtime, sim, tenant)
    admin = await new_client()
    await sign_in(admin, tenant.email, tenant.password)
    page = await admin.get(f"/ui/ranktracking/schedules/{schedule_id}")
    assert 'id="rt-share-form"' in page.text
    base = f"/ui/ranktracking/schedules/{schedule_id}/share"
    r = await admin.post(base, data={"days": "90", "_csrf_token": csrf_from(page.text)})
    assert r.status_code == 200, r.text
    url = r.text.split('id="rt-share-url">')[1].split("<")[0]
    assert "/shared/ranktracking/swr_" in url
    again = await admin.get(f"/ui/ranktracking/schedules/{schedule_id}")
    assert url not in again.text  # never shown again
    assert "data-confirm=" in again.text
    async with runtime.db.read() as session:
        link_id = (await session.execute(select(ReportLink.id))).scalar_one()
    r = await admin.post(f"{base}/{link_id}/revoke", data={"_csrf_token": csrf_from(again.text)})
    assert r.status_code in (302, 303)
    assert (await admin.get(_path(url))).status_code == 404


async def test_rt119_logo_upload_takes_png_and_jpeg_and_refuses_svg_and_big_files(
    new_client: Any, runtime: Runtime, tenant: Tenant
) -> None:
    admin = await new_client()
    await sign_in(admin, tenant.email, tenant.password)

    async def upload(data: bytes, name: str, kind: str) -> httpx.Response:
        page = await admin.get("/ui/workspace")
        return await admin.post(
            "/ui/workspace/logo",
            data={"_csrf_token": csrf_from(page.text)},
            files={"logo": (name, data, kind)},
        )

    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    for data, name, kind in (
        (svg, "logo.svg", "image/svg+xml"),
        (svg, "logo.png", "image/png"),  # the name and the claimed type do not count
        (logos.PNG_MAGIC + b"\0" * (logos.MAX_LOGO_BYTES + 1), "big.png", "image/png"),
        (b"", "empty.png", "image/png"),
    ):
        r = await upload(data, name, kind)
        assert r.status_code == 422, name
        assert 'id="logo-error"' in r.text
    async with runtime.db.read() as session:
        assert await logos.get_logo(session, tenant.workspace_id) is None

    jpeg = logos.JPEG_MAGIC + b"\xe0" + b"\0" * 100
    r = await upload(jpeg, "logo.bin", "application/octet-stream")
    assert r.status_code in (302, 303), r.text
    r = await upload(LOGO, "logo.png", "image/png")
    assert r.status_code in (302, 303), r.text
    image = await admin.get("/ui/workspace/logo")
    assert image.status_code == 200
    assert image.headers["content-type"] == "image/png"
    assert image.content == LOGO

    member = await new_client()
    await sign_in(member, tenant.member_email, tenant.member_password)
    page = await member.get("/ui/workspace")
    assert 'id="logo-form"' not in page.text
    r = await member.post(
        "/ui/workspace/logo",
        data={"_csrf_token": csrf_from(page.text)},
        files={"logo": ("x.png", LOGO, "image/png")},
    )
    assert r.status_code == 403


async def test_rt120_the_email_report_carries_the_logo_inline(
    client: httpx.AsyncClient,
    runtime: Runtime,
    clock: ManualClock,
    tenant: Tenant,
    sim: SerpSimulator,
    sink: SmtpSink,
) -> None:
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(runtime, tenant, keywords=KEYWORDS)
    await _set_logo(runtime, tenant)
    r = await client.put(
        f"{API}/schedules/{schedule.id}/report",
        json={"period": "weekly", "recipients": ["boss@example.com"]},
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    await measure(runtime, sim, schedule.id, PLAN[0])
    clock.set(datetime(2026, 3, 9, 0, 5, tzinfo=UTC))
    assert await claim_due(RankTrackingDeps.of(runtime), clock.now()) == 1
    async with runtime.db.read() as session:
        (delivery,) = (await session.execute(select(ReportDelivery.id))).scalars()
    await send_report_impl(RankTrackingDeps.of(runtime), delivery, final_attempt=False)
    (received,) = sink.snapshot()
    mime = parsed(received.raw)
    _, related = parts(mime)
    html_part, *images = parts(related)
    ids = {i["Content-ID"].strip("<>"): i.get_content() for i in images}
    assert ids["rt-logo@sweepline"] == LOGO
    assert 'src="cid:rt-logo@sweepline"' in html_part.get_content()
