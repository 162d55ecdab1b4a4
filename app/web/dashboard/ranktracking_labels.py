"""The schedule wizard's labels for each field, as its form shows them: what the one error policy
(``app.web.plain_errors``) names a field by when it refuses a value, and which input of the form
an error is shown next to."""

from __future__ import annotations

from app.web.plain_errors import FieldText, Label

SCHEDULE_LABELS: dict[str, Label] = {
    "name": "Name",
    "data_type": "Data type",
    "frequency": "Frequency",
    "source": "Keywords from",
    "list_id": "Keyword list",
    "keywords": FieldText("Keywords", shape="enter keywords, one a line"),
    "keywords[]": FieldText("Keywords", shape="enter keywords, one a line"),
    "depth": "Depth",
    "location_code": FieldText("Location", shape="pick a location from the list"),
    "language_code": FieldText("Language", shape="pick a language code from the list"),
    "domain": FieldText("Site", shape="enter the site to measure, like example.com"),
    "devices": "Devices",
    "devices[]": "Devices",
    "packages": "Keyword data packages",
    "packages[]": "Keyword data packages",
    "monthly_cap_eur": FieldText("Monthly cap in EUR", shape="enter an amount like 20 or 12.50"),
}

FIELD_LABELS: dict[str, Label] = {
    **SCHEDULE_LABELS,
    "amount_eur": "Amount in EUR",
    # The positions table's filters.
    "moved": "Moved by at least",
    "in_top": "Position",
    "out_of_top": "Position",
    "columns": "Runs shown",
    "cursor": "Page",
    "features": "SERP features",
    "domains": "Competitors",
    "targets": "Target URLs",
    "tag": "Tag",
}
"""Every form of the position-tracking pages: the wizard's fields, the balance's top-up, and the
positions table's filters (an address edited by hand)."""

CHOICES: dict[str, dict[str, str]] = {
    "data_type": {"serp": "SERP positions", "keyword_data": "Keyword data"},
    "frequency": {
        "daily": "daily",
        "weekly": "weekly",
        "biweekly": "biweekly",
        "monthly": "monthly",
        "quarterly": "quarterly",
    },
    "source": {"list": "a keyword list", "selection": "a fixed selection"},
    "depth": {"top10": "top 10", "top100": "top 100"},
}
"""The wizard's selects and radios: value -> what the option reads."""

NAME_MAX = 200


def input_of(field: str) -> str:
    """The wizard input an error on ``field`` (an API path, ``keywords[3]``) is shown next to."""
    return field.split("[", 1)[0].split(".", 1)[0]
