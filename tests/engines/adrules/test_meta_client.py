"""The Meta integration against the simulator (spec §7): error classification, usage headers,
batch replies with per-item errors and nulls, writes, versioned paths, and a token that never shows."""

from __future__ import annotations

import logging

import httpx
import msgspec
import pytest

from app.integrations.meta.client import GraphClient
from app.integrations.meta.errors import MetaError, error_from_response
from app.integrations.meta.reader import BatchGet, MetaReader
from app.integrations.meta.retry import RetryLog, with_retries
from app.integrations.meta.usage import parse_usage
from app.integrations.meta.writer import MetaWriter
from app.sandbox.meta import GraphWorld, SimCampaign
from tests.engines.adrules.factories import TOKEN
from tests.harness.sleep import RecordingSleep


@pytest.fixture
def meta(world: GraphWorld) -> GraphWorld:
    world.add_account("act_1", "One", currency="JPY")
    world.add_campaigns("act_1", 3, daily_budget=3000)
    world.grant(TOKEN, "act_1")
    return world


def _body(code: int, transient: bool = False) -> bytes:
    return msgspec.json.encode(
        {"error": {"message": "m", "type": "T", "code": code, "is_transient": transient}}
    )


@pytest.mark.parametrize("code", [1, 2, 4, 17, 32, 341, 613, 80000, 80004, 80014])
def test_transient_codes_are_retryable(code: int) -> None:
    assert error_from_response(400, _body(code)).transient


@pytest.mark.parametrize("code", [100, 190, 200, 10, 80015])
def test_other_codes_are_permanent(code: int) -> None:
    assert not error_from_response(400, _body(code)).transient


def test_5xx_and_the_is_transient_flag_are_retryable() -> None:
    assert error_from_response(503, _body(100)).transient
    assert error_from_response(400, _body(100, transient=True)).transient
    assert error_from_response(502, b"<html>bad gateway</html>").transient
    assert not error_from_response(400, b"garbage").transient


def test_usage_headers_are_read_leniently() -> None:
    headers = {
        "x-app-usage": '{"call_count": 12, "total_cputime": 40, "total_time": 3}',
        "x-ad-account-usage": '{"acc_id_util_pct": 55.5}',
        "x-business-use-case-usage": '{"123": [{"type": "ads_management", "call_count": 7, "estimated_time_to_regain_access": 3}]}',
    }
    usage = parse_usage(headers)
    assert usage.highest_percent == 55.5
    assert usage.regain_access_seconds == 180
    assert usage.throttled
    assert parse_usage({"x-app-usage": "{broken"}).highest_percent == 0


async def test_retries_only_transient_errors_and_honours_the_schedule() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise MetaError("busy", transient=True)
        return "ok"

    sleep, log = RecordingSleep(), RetryLog()
    assert await with_retries(flaky, sleep=sleep, log=log) == "ok"
    assert (sleep.waits, log.attempts) == ([1.0, 2.0], 3)

    async def denied() -> str:
        raise MetaError("expired", transient=False)

    with pytest.raises(MetaError):
        await with_retries(denied, sleep=sleep)
    assert sleep.waits == [1.0, 2.0]


async def test_batch_keeps_order_with_per_item_errors_and_timeout_nulls(
    meta: GraphWorld, graph: GraphClient
) -> None:
    reader = MetaReader(graph, TOKEN)
    ids = list(meta.accounts["act_1"].campaigns)
    meta.fail(f"insights:{ids[1]}", code=100, status=400, message="bad field")
    meta.null_batch_items = 1
    replies = await reader.batch(
        [
            BatchGet(f"{cid}/insights", {"date_preset": "last_7d", "fields": ["spend"]})
            for cid in ids
        ]
    )
    assert replies[0] is not None
    assert replies[0].code == 200
    assert msgspec.json.decode(replies[0].body or "")["data"][0]["spend"]
    assert replies[1] is not None
    assert replies[1].code == 400
    assert "bad field" in (replies[1].body or "")
    assert replies[2] is None
    assert meta.count("batch") == 1
    with pytest.raises(ValueError, match="at most 50"):
        await reader.batch([BatchGet(f"{ids[0]}/insights", {})] * 51)


async def test_no_delivery_means_no_row(meta: GraphWorld, graph: GraphClient) -> None:
    campaign = meta.add_campaign("act_1", SimCampaign(id="777", name="Quiet", delivering=False))
    rows = await MetaReader(graph, TOKEN).insights(
        campaign.id, date_preset="today", fields=["spend"], row_type=dict
    )
    assert rows == []


async def test_writer_updates_a_campaign_and_meta_errors_are_typed(
    meta: GraphWorld, graph: GraphClient
) -> None:
    cid = next(iter(meta.accounts["act_1"].campaigns))
    writer = MetaWriter(graph, TOKEN)
    await writer.update_campaign(cid, daily_budget=4500, status="PAUSED")
    live = await MetaReader(graph, TOKEN).campaign(cid)
    assert (live.daily_budget, live.effective_status) == ("4500", "PAUSED")
    assert meta.updates == [(cid, {"daily_budget": "4500", "status": "PAUSED"})]
    lifetime = meta.add_campaign(
        "act_1", SimCampaign(id="888", name="L", daily_budget=None, lifetime_budget=90000)
    )
    with pytest.raises(MetaError) as caught:
        await writer.update_campaign(lifetime.id, daily_budget=100)
    assert caught.value.code == 100
    assert not caught.value.transient


async def test_unversioned_calls_fail(meta: GraphWorld, settings: object) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.get(
            f"{meta.base_url}/act_1/campaigns", headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == 2500


async def test_the_token_never_shows_in_logs_reprs_or_errors(
    meta: GraphWorld, graph: GraphClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reader = MetaReader(graph, TOKEN)
    await reader.campaigns_page("act_1")
    meta.fail("campaigns.list", code=190, status=400, message="expired")
    with pytest.raises(MetaError) as caught:
        await reader.campaigns_page("act_1")
    assert TOKEN not in caplog.text
    assert TOKEN not in repr(reader)
    assert TOKEN not in str(caught.value)
    assert TOKEN not in repr(MetaWriter(graph, TOKEN))
