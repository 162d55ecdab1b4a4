"""Price list and estimate rounding (RT-18, RT-19, RT-37)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from app.engines.ranktracking.amounts import eur_down, eur_up, exact_eur
from app.engines.ranktracking.pricing import (
    PriceList,
    billable_micros,
    fraction_cents_up,
    micros_up,
    quote,
)
from app.engines.ranktracking.schedules.estimates import estimate
from app.engines.ranktracking.schedules.rules import validated
from app.runtime import Runtime
from app.sandbox.serp import SerpPrices
from app.settings import RankTrackingSettings
from tests.engines.ranktracking.factories import fund
from tests.factories import Tenant

PRICES = PriceList.from_settings(RankTrackingSettings())
AT_PAR = PriceList.from_settings(RankTrackingSettings(eur_per_usd=Decimal(1)))


def _serp(prices: PriceList, count: int, **kw: object) -> int:
    args: dict[str, object] = {"queue": "standard", "depth": 10, "devices": ["desktop"]}
    args.update(kw)
    return quote(prices, data_type="serp", count=count, packages=[], **args).total_micros  # type: ignore[arg-type]


def test_rt37_default_serp_prices_are_the_providers_page_prices() -> None:
    """At 1 EUR per USD the price list is the provider's bill: 0.0006 USD a first page on the
    standard queue, 0.0012 on priority, each further page of 10 at 0.75 of it (depth 100 = 10
    pages = 0.00465 USD), desktop and mobile alike — the same table the simulator bills from."""
    sim = SerpPrices()
    assert _serp(AT_PAR, 1) == 600 == micros_up(sim.serp(10, 1))
    assert _serp(AT_PAR, 1, depth=100) == 4650 == micros_up(sim.serp(100, 1))
    assert _serp(AT_PAR, 1, queue="priority") == 1200 == micros_up(sim.serp(10, 2))
    assert _serp(AT_PAR, 1, queue="priority", depth=100) == 9300 == micros_up(sim.serp(100, 2))
    assert _serp(AT_PAR, 1, devices=["mobile"]) == 600
    # The example: 110 top-100 standard checks, which the provider billed 0.5115 USD.
    assert _serp(AT_PAR, 110, depth=100) == 511_500


def test_rt37_prices_are_converted_with_the_configured_rate() -> None:
    assert RankTrackingSettings().eur_per_usd == Decimal("0.86")
    assert _serp(PRICES, 1) == 516  # 0.0006 USD × 0.86
    assert _serp(PRICES, 110, depth=100) == 439_890  # 0.5115 USD × 0.86
    assert PRICES.provider_micros(Decimal("0.5115")) == 439_890


def test_rt19_serp_price_depends_on_count_depth_queue_and_devices() -> None:
    one = _serp(PRICES, 100)
    assert one == 51_600
    assert _serp(PRICES, 100, depth=100) == 399_900
    assert _serp(PRICES, 100, queue="priority") == 103_200
    both = quote(
        PRICES,
        data_type="serp",
        count=100,
        queue="standard",
        depth=10,
        devices=["desktop", "mobile"],
        packages=[],
    )
    assert both.parts == [("desktop", 51_600), ("mobile", 51_600)]
    assert _serp(PRICES, 101) == 52_116  # no rounding to the cent per run


def test_rt37_keyword_data_is_billed_per_task_of_up_to_1000_keywords() -> None:
    def kd(count: int, packages: list[str], prices: PriceList = AT_PAR) -> int:
        return quote(
            prices,
            data_type="keyword_data",
            count=count,
            queue="standard",
            depth=None,
            devices=[],
            packages=packages,
        ).total_micros

    # RT-53: the standard method's price per task, as the provider's pricing page and the
    # simulator bill it (not the live method's).
    assert kd(1, ["volume"]) == 50_000 == micros_up(SerpPrices().keyword_data_task)
    assert kd(500, ["volume"]) == 50_000
    # One provider task returns volume, CPC, competition and monthly searches together.
    assert kd(500, ["volume", "cpc", "trends"]) == 50_000
    assert kd(1001, ["cpc"]) == 100_000
    assert kd(100, ["volume"], PRICES) == 43_000
    priced = PriceList.from_settings(RankTrackingSettings(price_kd_trends_usd=Decimal("0.01")))
    assert kd(100, ["volume", "trends"], priced) == micros_up(Decimal("0.06") * Decimal("0.86"))


def test_rt19_only_displays_and_the_monthly_estimate_round_to_the_cent() -> None:
    assert micros_up(Decimal("0.0000001")) == 1
    assert micros_up(Decimal("0.000516")) == 516
    assert (eur_up(516), eur_down(516), exact_eur(516)) == ("0.01", "0.00", "0.000516")
    assert (eur_up(20_000), eur_down(29_999)) == ("0.02", "0.02")
    assert fraction_cents_up(10_000, Fraction(52, 12)) == 5  # 4.33… cents → 5
    assert fraction_cents_up(120_000, Fraction(365, 12)) == 365
    assert fraction_cents_up(516, Fraction(365, 12)) == 2  # 1.57 cents → 2
    assert (
        billable_micros(
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
    # 7 × 0.000516 EUR × 2 devices, not rounded up to a cent per device
    assert est.cost_per_run_micros == 7224
    assert est.cost_per_run_eur == "0.01"
    assert est.runs_per_month == "30.42"
    assert est.monthly_cents == 22  # 0.7224 cents × 365/12 = 21.97 → 22
    assert est.monthly_eur == "0.22"
    assert est.average_per_keyword_eur == "0.001032"
    assert est.available_micros == 10_000_000
    assert est.balance_after_run_micros == 10_000_000 - 7224
