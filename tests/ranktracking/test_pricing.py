"""Price list and estimate rounding (RT-18, RT-19, RT-37)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from app.engines.ranktracking.config import validated
from app.engines.ranktracking.pricing import (
    PriceList,
    billable_cents,
    cents_up,
    fraction_cents_up,
    quote,
)
from app.engines.ranktracking.service import estimate
from app.runtime import Runtime
from app.settings import RankTrackingSettings
from tests.factories import Tenant
from tests.ranktracking.conftest import fund

PRICES = PriceList.from_settings(RankTrackingSettings())


def test_rt19_serp_price_depends_on_count_depth_queue_and_devices() -> None:
    base = dict(data_type="serp", count=100, packages=[])
    one = quote(PRICES, queue="standard", depth=10, devices=["desktop"], **base)  # type: ignore[arg-type]
    assert one.total_cents == 6  # 100 × 0.0006 EUR
    assert quote(PRICES, queue="standard", depth=100, devices=["desktop"], **base).total_cents == 12  # type: ignore[arg-type]
    assert quote(PRICES, queue="priority", depth=10, devices=["desktop"], **base).total_cents == 12  # type: ignore[arg-type]
    both = quote(PRICES, queue="standard", depth=10, devices=["desktop", "mobile"], **base)  # type: ignore[arg-type]
    assert both.parts == [("desktop", 6), ("mobile", 6)]
    assert (
        quote(
            PRICES, queue="standard", depth=10, devices=["desktop"], **{**base, "count": 101}
        ).total_cents
        == 7
    )  # type: ignore[arg-type]


def test_rt19_keyword_data_price_depends_on_count_and_packages() -> None:
    q = quote(
        PRICES,
        data_type="keyword_data",
        count=100,
        queue="standard",
        depth=None,
        devices=[],
        packages=["volume"],
    )
    assert q.parts == [(None, 5)]
    q = quote(
        PRICES,
        data_type="keyword_data",
        count=100,
        queue="standard",
        depth=None,
        devices=[],
        packages=["volume", "cpc", "trends"],
    )
    assert q.total_cents == 13


def test_rt19_rounding_up_to_the_cent_never_floats() -> None:
    assert cents_up(Decimal("0.0042")) == 1
    assert cents_up(Decimal("0.12")) == 12
    assert cents_up(Decimal("0.120001")) == 13
    assert fraction_cents_up(1, Fraction(52, 12)) == 5  # 4.33… → 5
    assert fraction_cents_up(12, Fraction(365, 12)) == 365
    assert fraction_cents_up(7, Fraction(365, 12)) == 213  # 212.9166… → 213
    assert (
        billable_cents(
            PRICES,
            data_type="serp",
            billable=0,
            queue="standard",
            depth=10,
            device="desktop",
            packages=[],
        )
        == 0
    )


async def test_rt18_estimate_returns_every_figure(runtime: Runtime, tenant: Tenant) -> None:
    await fund(runtime, tenant, 1000)
    config = validated(
        name="x",
        data_type="serp",
        frequency="daily",
        list_id=None,
        keywords=[f"k{i}" for i in range(7)],
        depth="top10",
        location_code=2840,
        language_code="en",
        domain="a.com",
        devices=["desktop", "mobile"],
        packages=None,
        monthly_cap_eur=None,
        max_selection=200,
    )
    async with runtime.db.read() as session:
        est = await estimate(
            session,
            runtime.settings.ranktracking,
            organisation_id=tenant.organisation_id,
            config=config,
            keyword_count=7,
        )
    assert est.keyword_count == 7
    assert est.cost_per_run_cents == 2  # 1 cent per device, each rounded up
    assert est.runs_per_month == "30.42"
    assert est.monthly_cents == 61  # 2 × 365/12 = 60.83 → 61
    assert est.monthly_eur == "0.61"
    assert est.average_per_keyword_eur == "0.0029"
    assert est.available_cents == 1000
    assert est.balance_after_run_cents == 998
