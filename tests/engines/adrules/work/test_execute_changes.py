"""What each action would write, worked out purely: clamps at the maximum and minimum write the
boundary (AR-17, AR-21), zero-decimal currencies, name templates and no-ops."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.engines.adrules.schemas import (
    ActivateCampaign,
    AppendToName,
    DecreaseBudget,
    IncreaseBudget,
    NotifyWebhook,
    PauseCampaign,
    RemoveFromName,
    Rename,
    SetBudget,
)
from app.engines.adrules.work.changes import (
    action_parameters,
    plan_budget,
    plan_name,
    plan_status,
)


def test_increase_by_percent() -> None:
    change = plan_budget(
        IncreaseBudget(by="percent", amount=Decimal(10), max=Decimal(100)), 5000, "USD"
    )
    assert change.write == {"daily_budget": 5500}
    assert change.before == {"daily_budget": "50.00"}
    assert change.after == {"daily_budget": "55.00"}


def test_ar17_increase_is_clamped_at_the_maximum() -> None:
    change = plan_budget(
        IncreaseBudget(by="percent", amount=Decimal(50), max=Decimal(60)), 5000, "USD"
    )
    assert change.write == {"daily_budget": 6000}
    assert change.after == {"daily_budget": "60.00", "clamped_at": "max", "projected": "75.00"}


def test_ar17_decrease_is_clamped_at_the_minimum() -> None:
    change = plan_budget(
        DecreaseBudget(by="amount", amount=Decimal(30), min=Decimal(25)), 5000, "USD"
    )
    assert change.write == {"daily_budget": 2500}
    assert change.after is not None
    assert change.after["clamped_at"] == "min"


def test_already_at_the_boundary_writes_nothing() -> None:
    assert (
        plan_budget(IncreaseBudget(amount=Decimal(10), max=Decimal(50)), 5000, "USD").write is None
    )
    assert plan_budget(DecreaseBudget(amount=Decimal(10), min=Decimal(50)), 5000, "USD").noop


def test_zero_decimal_currency_budgets() -> None:
    change = plan_budget(
        IncreaseBudget(by="amount", amount=Decimal(500), max=Decimal(100000)), 3000, "JPY"
    )
    assert change.write == {"daily_budget": 3500}
    assert change.after == {"daily_budget": "3500"}
    assert plan_budget(SetBudget(amount=Decimal(2000)), 3000, "JPY").write == {"daily_budget": 2000}


def test_set_budget_to_the_current_value_is_a_noop() -> None:
    assert plan_budget(SetBudget(amount=Decimal("50")), 5000, "USD").noop


def test_a_campaign_without_a_budget_is_skipped_pointing_at_its_ad_sets() -> None:
    change = plan_budget(SetBudget(amount=Decimal(20)), None, "USD")
    assert change.write is None
    assert (change.skip or "").startswith("budget_on_ad_sets")
    assert "ad-set level" in (change.skip or "")
    on_campaign = plan_budget(SetBudget(amount=Decimal(20)), None, "USD", level="adset")
    assert (on_campaign.skip or "").startswith("budget_on_campaign")


def test_rename_template() -> None:
    change = plan_name(
        Rename(template="{name} [{rule} {date}]"),
        "Spring",
        rule="Scale",
        date="2026-03-02",
        campaign_id="1",
    )
    assert change.write == {"name": "Spring [Scale 2026-03-02]"}
    assert change.before == {"name": "Spring"}


@pytest.mark.parametrize(
    ("name", "text", "sep", "expected"),
    [
        ("Spring", "PAUSED-BY-RULE", " | ", "Spring | PAUSED-BY-RULE"),
        ("Spring | PAUSED-BY-RULE", "PAUSED-BY-RULE", " | ", None),
        ("", "X", " ", "X"),
    ],
)
def test_append_to_name_is_a_noop_when_present(
    name: str, text: str, sep: str, expected: str | None
) -> None:
    change = plan_name(
        AppendToName(text=text, separator=sep), name, rule="r", date="d", campaign_id="1"
    )
    assert (change.write or {}).get("name") == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Spring - TEST", "Spring"),
        ("TEST - Spring", "Spring"),
        ("Spring - TEST - EU", "Spring - EU"),
        ("Spring", None),
        ("Spring - TESTING", None),
    ],
)
def test_remove_from_name(name: str, expected: str | None) -> None:
    change = plan_name(
        RemoveFromName(text="TEST", separator=" - "), name, rule="r", date="d", campaign_id="1"
    )
    assert (change.write or {}).get("name") == expected


def test_status_changes() -> None:
    assert plan_status(PauseCampaign(), "ACTIVE").write == {"status": "PAUSED"}
    assert plan_status(PauseCampaign(), "PAUSED").noop
    assert plan_status(ActivateCampaign(), "PAUSED").after == {"status": "ACTIVE"}


def test_the_webhook_secret_is_never_in_the_recorded_parameters() -> None:
    for action in (
        NotifyWebhook(url="https://example.com/hook", secret="s" * 20),
        NotifyWebhook(
            url="https://example.com/hook", has_secret=True, sealed_secret="gAAAA-sealed"
        ),
    ):
        params = action_parameters(action)
        assert params == {
            "type": "notify_webhook",
            "url": "https://example.com/hook",
            "has_secret": True,
        }
