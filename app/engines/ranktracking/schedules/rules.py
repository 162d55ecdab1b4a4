"""A schedule's configuration rules (RT-3, RT-5, RT-7, RT-12, RT-15, RT-20, RT-26), as pure
functions.

:func:`validated` turns a request into a :class:`Config` or raises :class:`ValidationFailed` naming
every wrong field; :func:`dedup_key` is the duplicate key of RT-15. :func:`over_run_limit` and
:func:`check_queue` are the refusals of a request that more than one operation gives (creation and
estimates, estimates and manual runs), written once so each answers with the same body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from app.engines.ranktracking import locations
from app.engines.ranktracking.due import KEYWORD_DATA_FREQUENCIES, SERP_FREQUENCIES
from app.engines.ranktracking.keywords import normalise_all
from app.engines.ranktracking.members import over_run_limit_reason
from app.engines.ranktracking.pricing import DEVICES, PACKAGES, PRIORITY
from app.errors import ValidationFailed

MIN_CAP_CENTS = 500
"""RT-20: a monthly cap is at least 5 EUR."""
MAX_CAP_CENTS = 100_000_000
"""A monthly cap above 1,000,000 EUR is a typo (and would not fit every money column)."""
MAX_ID = 2**63 - 1
"""Row ids are 64-bit; a larger number cannot name a row and must not reach the database."""

PROVIDER_LANGUAGES = frozenset(
    (  # noqa: SIM905 - a code list reads better as one string
        "ar bg cs da de el en es et fi fr he hi hr hu id it ja ko lt lv ms nl no pl pt ro ru sk sl "
        "sr sv th tr uk vi zh-CN zh-TW"
    ).split()
)
"""The provider's language codes for Google SERPs, in its spelling: a lower-case ISO 639-1 code,
and a region subtag only where the provider has one (Chinese). Anything else is refused by the
provider's ``task_post`` with ``40501`` for every task."""
_BY_FOLDED = {code.casefold(): code for code in PROVIDER_LANGUAGES}
_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
DEPTHS = {"top10": 10, "top100": 100}
DEPTH_NAMES = {10: "top10", 100: "top100"}


def canonical_language(code: str) -> str | None:
    """The provider's spelling of ``code`` (``EN`` → ``en``, ``zh_tw`` → ``zh-TW``), or None when
    the provider has no such language."""
    return _BY_FOLDED.get(code.strip().replace("_", "-").casefold())


def valid_language(code: str) -> bool:
    return canonical_language(code) is not None


def normalise_domain(raw: str) -> str:
    domain = raw.strip().lower()
    for prefix in ("https://", "http://"):
        domain = domain.removeprefix(prefix)
    return domain.split("/", 1)[0].removeprefix("www.")


@dataclass(frozen=True, slots=True)
class Config:
    """A checked schedule configuration."""

    name: str
    data_type: str
    frequency: str
    list_id: int | None
    keywords: list[str] | None
    depth: int | None
    location_code: int | None
    language_code: str | None
    domain: str | None
    devices: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    monthly_cap_cents: int | None = None

    @property
    def devices_text(self) -> str | None:
        return ",".join(self.devices) if self.devices else None


class FieldErrors:
    """The wrong fields of one request, collected so that a single refusal names all of them
    (the first in its message, every one in its details)."""

    def __init__(self) -> None:
        self.details: list[dict[str, Any]] = []

    def add(self, path: str, message: str, code: str = "invalid") -> None:
        self.details.append({"field": path, "message": message, "code": code})

    def raise_if_any(self) -> None:
        if self.details:
            first = self.details[0]
            raise ValidationFailed(f"{first['field']}: {first['message']}", details=self.details)


def cap_cents(
    value: Decimal | None, errors: FieldErrors, path: str = "monthly_cap_eur"
) -> int | None:
    if value is None:
        return None
    if not value.is_finite():
        errors.add(path, "must be an amount in EUR")
        return None
    cents = value * 100
    if cents != cents.to_integral_value():
        errors.add(path, "must be a whole number of cents")
        return None
    if cents < MIN_CAP_CENTS:
        errors.add(path, "a monthly cap is at least 5 EUR (omit it for no cap)", "cap_too_low")
        return None
    if cents > MAX_CAP_CENTS:
        errors.add(path, "a monthly cap is at most 1000000 EUR", "cap_too_high")
        return None
    return int(cents)


def _check_source(
    errors: FieldErrors,
    data_type: str,
    list_id: int | None,
    keywords: list[str] | None,
    max_selection: int,
) -> list[str] | None:
    """A keyword list or a direct selection, not both; the selection normalised."""
    if (list_id is None) == (keywords is None):
        errors.add(
            "list_id", "give either a keyword list (list_id) or a direct selection (keywords)"
        )
    if list_id is not None and not 1 <= list_id <= MAX_ID:
        errors.add("list_id", "not a keyword list id", "unknown_list")
    if keywords is None:
        return None
    if data_type != "serp":
        errors.add(
            "keywords", "a direct selection is for SERP schedules only", "selection_serp_only"
        )
    return checked_selection(keywords, max_selection, errors)


def checked_selection(keywords: list[str], max_selection: int, errors: FieldErrors) -> list[str]:
    """RT-3: a direct selection normalised, with at least one keyword and at most
    ``max_selection``; at creation and in the selection's own editor."""
    selection = normalise_all(keywords).keywords
    if not selection:
        errors.add("keywords", "a direct selection needs at least one keyword", "selection_empty")
    elif len(selection) > max_selection:
        errors.add(
            "keywords",
            f"a direct selection holds at most {max_selection} keywords ({len(selection)} given)",
            "selection_too_large",
        )
    return selection


def _check_serp(
    errors: FieldErrors,
    frequency: str,
    depth: str | None,
    devices: list[str] | None,
    domain: str | None,
    packages: list[str] | None,
) -> None:
    if frequency not in SERP_FREQUENCIES:
        errors.add("frequency", f"SERP schedules run {', '.join(SERP_FREQUENCIES)}")
    if depth not in DEPTHS:
        errors.add("depth", "must be top10 or top100")
    if not devices:
        errors.add("devices", "choose desktop, mobile or both")
    elif len(set(devices)) != len(devices) or not set(devices) <= set(DEVICES):
        errors.add("devices", "each of desktop and mobile at most once")
    if not domain or not _DOMAIN.match(normalise_domain(domain)):
        errors.add("domain", "the site to measure, e.g. example.com")
    if packages:
        errors.add("packages", "packages are for keyword-data schedules")


def _check_keyword_data(
    errors: FieldErrors,
    frequency: str,
    depth: str | None,
    devices: list[str] | None,
    packages: list[str] | None,
) -> None:
    if frequency not in KEYWORD_DATA_FREQUENCIES:
        errors.add("frequency", "keyword-data schedules run monthly or quarterly")
    if not packages:
        errors.add("packages", "choose at least one package", "packages_empty")
    elif len(set(packages)) != len(packages) or not set(packages) <= set(PACKAGES):
        errors.add("packages", f"packages are {', '.join(PACKAGES)}, each at most once")
    if depth is not None or devices:
        errors.add("devices", "depth and devices are for SERP schedules")


def _check_location(errors: FieldErrors, location_code: int | None) -> None:
    """The code's shape; whether the provider lists it is read from the table
    (:func:`~app.engines.ranktracking.schedules.config.checked_location`)."""
    if location_code is None or location_code <= 0:
        errors.add("location_code", "must be a positive location code")
    elif location_code > locations.MAX_LOCATION_CODE:
        errors.add("location_code", unknown_location_message(location_code), "unknown_location")


def unknown_location_message(location_code: int) -> str:
    return (
        f"{location_code} is not one of the provider's locations "
        "(search them with GET /api/v1/ranktracking/locations?q=...)"
    )


def validated(
    *,
    name: str,
    data_type: str,
    frequency: str,
    list_id: int | None,
    keywords: list[str] | None,
    depth: str | None,
    location_code: int | None,
    language_code: str | None,
    domain: str | None,
    devices: list[str] | None,
    packages: list[str] | None,
    monthly_cap_eur: Decimal | None,
    max_selection: int,
    require_name: bool = True,
) -> Config:
    """Check every rule of a schedule's configuration; raises naming each wrong field."""
    errors = FieldErrors()
    if require_name and not name.strip():
        errors.add("name", "is required")
    selection = _check_source(errors, data_type, list_id, keywords, max_selection)
    if data_type == "serp":
        _check_serp(errors, frequency, depth, devices, domain, packages)
    else:
        _check_keyword_data(errors, frequency, depth, devices, packages)
    _check_location(errors, location_code)
    language = canonical_language(language_code or "")
    if language is None:
        errors.add(
            "language_code",
            "must be one of the provider's language codes: "
            + ", ".join(sorted(PROVIDER_LANGUAGES)),
            "unknown_language",
        )
    cap = cap_cents(monthly_cap_eur, errors)
    errors.raise_if_any()
    ordered_devices = [d for d in DEVICES if d in (devices or [])]
    ordered_packages = [p for p in PACKAGES if p in (packages or [])]
    return Config(
        name=name.strip(),
        data_type=data_type,
        frequency=frequency,
        list_id=list_id,
        keywords=selection,
        depth=DEPTHS[depth] if depth else None,
        location_code=location_code,
        language_code=language,
        domain=normalise_domain(domain) if data_type == "serp" and domain else None,
        devices=ordered_devices if data_type == "serp" else [],
        packages=ordered_packages if data_type != "serp" else [],
        monthly_cap_cents=cap,
    )


def over_run_limit(total: int, limit: int) -> ValidationFailed:
    """RT-5: the refusal of a keyword list with ``total`` members when a run may request at most
    ``limit``."""
    return ValidationFailed.field(
        "list_id", over_run_limit_reason(total, limit), code="members_over_limit"
    )


def check_queue(data_type: str, queue: str) -> None:
    """RT-26: only SERP schedules have a priority queue ("measure quickly")."""
    if queue == PRIORITY and data_type != "serp":
        raise ValidationFailed.field(
            "queue", "keyword data has no priority queue", code="no_priority"
        )


def dedup_key(config: Config) -> str | None:
    """RT-15: (list, data type, frequency) plus, for SERP, (device set, location, language).
    Depth, packages, cap, domain and name are not in the key. Direct selections have none."""
    if config.list_id is None:
        return None
    parts = [str(config.list_id), config.data_type, config.frequency]
    if config.data_type == "serp":
        parts += [config.devices_text or "", str(config.location_code), config.language_code or ""]
    return "|".join(parts)


def with_changes(config: Config, **changes: Any) -> Config:
    return replace(config, **changes)
