"""The e-mail report's HTML alternative with its charts as inline PNG images (RT-111, RT-112),
read as raw MIME from a real SMTP server."""

from __future__ import annotations

import struct
import zlib
from datetime import UTC, datetime

import httpx
from sqlalchemy import select

from app.clock import ManualClock
from app.engines.ranktracking.alert_models import ReportDelivery
from app.engines.ranktracking.alerts.report import claim_due, send_report_impl
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.reports.png_chart import Series, line_chart
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from app.sandbox.smtp import SmtpSink
from tests.conftest import auth
from tests.engines.ranktracking.factories import KEYWORDS, PLAN, fund, make_schedule, measure
from tests.factories import Tenant
from tests.harness.mail import parsed, parts

API = "/api/v1/ranktracking"


def _decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB rows of a PNG written by ``line_chart`` (checking every CRC)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, header = 8, b"", b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, colour_type = struct.unpack(">IIBB", header[:10])
    assert (depth, colour_type) == (8, 2)
    raw = zlib.decompress(idat)
    stride = 1 + width * 3
    rows = [raw[y * stride : (y + 1) * stride] for y in range(height)]
    assert all(r[0] == 0 for r in rows)  # filter "none" on every scanline
    return width, height, [r[1:] for r in rows]


def test_the_chart_is_a_valid_png_with_the_line_where_the_values_put_it() -> None:
    blue = (37, 99, 235)
    png = line_chart(
        [Series(blue, [1.0, None, 10.0])], low=1, high=10, inverted=True, width=100, height=60
    )
    width, height, rows = _decode_png(png)
    assert (width, height) == (100, 60)

    def colour(x: int, y: int) -> tuple[int, ...]:
        return tuple(rows[y][x * 3 : x * 3 + 3])

    assert colour(12, 12) == blue  # position 1 (the best) at the top left
    assert colour(87, 47) == blue  # position 10 at the bottom right
    assert colour(50, 30) != blue  # a gap is not bridged


async def test_the_report_mail_carries_html_with_inline_charts_and_a_text_alternative(
    client: httpx.AsyncClient,
    runtime: Runtime,
    clock: ManualClock,
    tenant: Tenant,
    sim: SerpSimulator,
    sink: SmtpSink,
) -> None:
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(
        runtime, tenant, name="Shoes <&>", keywords=KEYWORDS, devices=["desktop", "mobile"]
    )
    r = await client.put(
        f"{API}/schedules/{schedule.id}/report",
        json={"period": "weekly", "recipients": ["boss@example.com"]},
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    await measure(runtime, sim, schedule.id, PLAN[0])
    clock.advance(days=2)
    await measure(runtime, sim, schedule.id, PLAN[1])
    clock.set(datetime(2026, 3, 9, 0, 5, tzinfo=UTC))
    assert await claim_due(RankTrackingDeps.of(runtime), clock.now()) == 1
    async with runtime.db.read() as session:
        (delivery,) = (await session.execute(select(ReportDelivery.id))).scalars()
    assert (
        await send_report_impl(RankTrackingDeps.of(runtime), delivery, final_attempt=False)
        == "sent"
    )

    (received,) = sink.snapshot()
    mime = parsed(received.raw)
    assert mime.get_content_type() == "multipart/alternative"
    text, related = parts(mime)
    assert text.get_content_type() == "text/plain"
    assert "Biggest gains:" in text.get_content()
    assert related.get_content_type() == "multipart/related"
    html_part, *images = parts(related)
    assert html_part.get_content_type() == "text/html"
    html = html_part.get_content()
    assert [i.get_content_type() for i in images] == ["image/png", "image/png"]
    for image in images:
        cid = image["Content-ID"].strip("<>")
        assert f'src="cid:{cid}"' in html  # each image is referenced by the HTML
        assert image.get_content_disposition() == "inline"
        width, height, _ = _decode_png(image.get_content())
        assert (width, height) == (560, 220)
    referenced = {part.split('"')[0] for part in html.split('src="cid:')[1:]}
    assert referenced == {i["Content-ID"].strip("<>") for i in images}  # no dangling reference
    assert "Shoes &lt;&amp;&gt;" in html  # customer text escaped
    assert "Shoes <&>" not in html
    assert "Average position" in html
    assert "Visibility" in html
    assert "red shoes" in html
    assert f"/ui/ranktracking/schedules/{schedule.id}" in html


async def test_a_period_without_measurement_sends_html_without_images(
    client: httpx.AsyncClient,
    runtime: Runtime,
    clock: ManualClock,
    tenant: Tenant,
    sink: SmtpSink,
) -> None:
    schedule = await make_schedule(runtime, tenant, name="Empty", keywords=KEYWORDS)
    await client.put(
        f"{API}/schedules/{schedule.id}/report",
        json={"period": "weekly", "recipients": ["boss@example.com"]},
        headers=auth(tenant),
    )
    clock.set(datetime(2026, 3, 9, 0, 5, tzinfo=UTC))
    assert await claim_due(RankTrackingDeps.of(runtime), clock.now()) == 1
    async with runtime.db.read() as session:
        (delivery,) = (await session.execute(select(ReportDelivery.id))).scalars()
    assert (
        await send_report_impl(RankTrackingDeps.of(runtime), delivery, final_attempt=False)
        == "sent"
    )
    (received,) = sink.snapshot()
    mime = parsed(received.raw)
    _text, html = parts(mime)
    assert html.get_content_type() == "text/html"  # no related part without an image
    assert "No measurement in this period." in html.get_content()
