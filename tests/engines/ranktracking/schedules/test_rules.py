"""The field rules a schedule is stored by: the duplicate key, the SERP context and keyword data
rules (RT-7, RT-12, RT-15, RT-20)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from app.engines.ranktracking.schedules.rules import (
    FieldErrors,
    dedup_key,
    over_run_limit,
    validated,
)
from app.errors import ValidationFailed


def _config(**overrides: Any):
    values: dict[str, Any] = {
        "name": "n",
        "data_type": "serp",
        "frequency": "daily",
        "list_id": 7,
        "keywords": None,
        "depth": "top10",
        "location_code": 2840,
        "language_code": "en",
        "domain": "a.com",
        "devices": ["desktop"],
        "packages": None,
        "monthly_cap_eur": None,
        "max_selection": 200,
    }
    values.update(overrides)
    return validated(**values)


@pytest.mark.parametrize(
    ("field", "value", "in_key"),
    [
        ("list_id", 8, True),
        ("frequency", "weekly", True),
        ("devices", ["desktop", "mobile"], True),
        ("location_code", 2250, True),
        ("language_code", "fr", True),
        ("depth", "top100", False),
        ("monthly_cap_eur", Decimal("20"), False),
        ("domain", "b.com", False),
        ("name", "other", False),
    ],
)
def test_rt15_duplicate_key_matrix_serp(field: str, value: object, in_key: bool) -> None:
    base = dedup_key(_config())
    changed = dedup_key(_config(**{field: value}))
    assert (changed != base) is in_key


def test_rt15_duplicate_key_keyword_data_and_selections() -> None:
    kd = {
        "data_type": "keyword_data",
        "frequency": "monthly",
        "depth": None,
        "devices": None,
        "domain": None,
    }
    base = dedup_key(_config(**kd, packages=["volume"]))
    assert dedup_key(_config(**kd, packages=["volume", "cpc"])) == base  # packages not in the key
    assert dedup_key(_config(**{**kd, "frequency": "quarterly"}, packages=["volume"])) != base
    assert dedup_key(_config(**kd, packages=["volume"])) != dedup_key(_config())  # data type is
    assert dedup_key(_config(list_id=None, keywords=["a"])) is None  # direct selections have none


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"depth": "top20"}, "depth"),
        ({"location_code": 0}, "location_code"),
        ({"language_code": "xx"}, "language_code"),
        ({"language_code": "english"}, "language_code"),
        ({"devices": []}, "devices"),
        ({"frequency": "quarterly"}, "frequency"),
        ({"monthly_cap_eur": Decimal("4.99")}, "monthly_cap_eur"),
        ({"domain": "not a domain"}, "domain"),
    ],
)
def test_rt7_rt12_rt20_serp_context_rules(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationFailed) as info:
        _config(**overrides)
    assert info.value.details[0]["field"] == field


def test_rt7_keyword_data_rules() -> None:
    kd = {"data_type": "keyword_data", "depth": None, "devices": None, "domain": None}
    with pytest.raises(ValidationFailed) as info:
        _config(**kd, frequency="weekly", packages=["volume"])
    assert info.value.details[0]["field"] == "frequency"
    with pytest.raises(ValidationFailed) as info:
        _config(**kd, frequency="monthly", packages=[])
    assert info.value.details[0]["code"] == "packages_empty"
    assert _config(**kd, frequency="quarterly", packages=["trends", "volume"]).packages == [
        "volume",
        "trends",
    ]
    # The provider's spelling: Chinese keeps its region, other languages have none.
    assert _config(language_code="zh-tw").language_code == "zh-TW"
    assert _config(language_code="EN").language_code == "en"
    with pytest.raises(ValidationFailed):
        _config(language_code="pt-BR")


def test_rt5_the_over_limit_refusal_names_the_list_its_size_and_the_limit() -> None:
    refusal = over_run_limit(501, 500)
    said = "the list has 501 keywords; a run may request at most 500"
    assert (refusal.status, refusal.code, refusal.message) == (
        422,
        "validation_failed",
        f"list_id: {said}",
    )
    assert refusal.details == [{"field": "list_id", "message": said, "code": "members_over_limit"}]


def test_field_errors_refuse_once_naming_every_field() -> None:
    errors = FieldErrors()
    errors.raise_if_any()  # nothing collected: nothing refused
    errors.add("name", "is required")
    errors.add("depth", "must be top10 or top100", "bad_depth")
    with pytest.raises(ValidationFailed) as info:
        errors.raise_if_any()
    assert info.value.message == "name: is required"
    assert [(d["field"], d["code"]) for d in info.value.details] == [
        ("name", "invalid"),
        ("depth", "bad_depth"),
    ]
