"""The schedule wizard's form on the position-tracking pages: the fields as the browser posts
them, the wizard's own checks, the API's request struct it becomes (the services check every
rule), and the messages a refused form shows beside its fields."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

import msgspec

from app.db.session import ReadSession
from app.engines.ranktracking import locations
from app.engines.ranktracking.keywords import parse_import
from app.engines.ranktracking.schemas import RankScheduleIn
from app.errors import DomainError, ValidationFailed
from app.web.dashboard.common import error_messages
from app.web.dashboard.ranktracking_labels import CHOICES, FIELD_LABELS, NAME_MAX, input_of
from app.web.plain_errors import plain_error


class ScheduleForm(msgspec.Struct, kw_only=True):
    """The wizard's fields as the browser posts them (all text; checkboxes "on" or absent).
    Unknown fields (the CSRF token) are ignored."""

    name: str = ""
    data_type: str = "serp"
    frequency: str = "weekly"
    source: str = "list"
    list_id: str = ""
    keywords: str = ""
    depth: str = "top10"
    location_code: str = "2840"
    language_code: str = "en"
    domain: str = ""
    device_desktop: str = ""
    device_mobile: str = ""
    package_volume: str = ""
    package_cpc: str = ""
    package_trends: str = ""
    monthly_cap_eur: str = ""


def int_of(value: str) -> int | None:
    """A whole number typed in a field; None when it is not one."""
    try:
        return int(value.strip())
    except ValueError:
        return None


def decimal_of(value: str) -> Decimal | None:
    """An amount typed in a field (a comma or a point); None when empty, NaN when unreadable
    (the services refuse it with the field's name)."""
    if not value.strip():
        return None
    try:
        return Decimal(value.strip().replace(",", "."))
    except InvalidOperation:
        return Decimal("NaN")


def schedule_in(form: ScheduleForm) -> RankScheduleIn:
    """The wizard's form as the API's request struct (the services check every rule)."""
    serp = form.data_type == "serp"
    devices: list[Any] = [d for d in ("desktop", "mobile") if getattr(form, f"device_{d}")]
    packages: list[Any] = [p for p in ("volume", "cpc", "trends") if getattr(form, f"package_{p}")]
    use_list = form.source == "list"
    return RankScheduleIn(
        name=form.name,
        data_type=form.data_type if form.data_type in ("serp", "keyword_data") else "serp",  # type: ignore[arg-type]
        frequency=form.frequency  # type: ignore[arg-type]
        if form.frequency in ("daily", "weekly", "biweekly", "monthly", "quarterly")
        else "weekly",
        list_id=int_of(form.list_id) if use_list else None,
        keywords=None if use_list else parse_import(form.keywords),
        depth=(form.depth if form.depth in ("top10", "top100") else None) if serp else None,  # type: ignore[arg-type]
        location_code=int_of(form.location_code),
        language_code=form.language_code.strip() or None,
        domain=form.domain.strip() or None if serp else None,
        devices=devices if serp else None,
        packages=packages if not serp else None,
        monthly_cap_eur=decimal_of(form.monthly_cap_eur),
    )


async def located(session: ReadSession, form: ScheduleForm) -> ScheduleForm:
    """The form with its location as a code: a name typed instead of picking from the list is
    resolved, or a clear error on the field says there is none or which ones it could be."""
    if form.data_type != "serp":
        return form
    code = await locations.resolve(session, form.location_code)
    return msgspec.structs.replace(form, location_code=str(code))


def error_text(exc: DomainError) -> list[str]:
    """The refusal's messages as a page lists them, each field by its label."""
    return error_messages(exc, FIELD_LABELS)


def field_errors(exc: DomainError) -> dict[str, str]:
    """Each refused field's message, keyed by the wizard input it is shown next to."""
    shown: dict[str, str] = {}
    for detail in exc.details or []:
        if isinstance(detail, dict) and detail.get("field"):
            field = str(detail["field"])
            text = plain_error(field, str(detail.get("message") or exc.message), FIELD_LABELS)
            shown.setdefault(input_of(field), text)
    return shown


def wizard_problems(form: ScheduleForm) -> list[dict[str, str]]:
    """What the wizard itself refuses before the services see the schedule: a choice it never
    offered (the form would otherwise fall back to a default without a word), a name too long,
    a keyword list not chosen."""
    found: list[dict[str, str]] = []
    for name, options in CHOICES.items():
        if getattr(form, name) not in options:
            listed = list(options.values())
            said = ", ".join(listed[:-1]) + " or " + listed[-1]
            found.append({"field": name, "message": f"choose {said}", "code": "invalid"})
    if len(form.name) > NAME_MAX:
        found.append(
            {"field": "name", "message": f"enter at most {NAME_MAX} characters", "code": "invalid"}
        )
    if form.source == "list" and int_of(form.list_id) is None:
        found.append(
            {"field": "list_id", "message": "choose one of your keyword lists", "code": "required"}
        )
    return found


def checked(form: ScheduleForm) -> ScheduleForm:
    """The form, once the wizard's own checks pass (else 422 naming each field)."""
    if found := wizard_problems(form):
        raise ValidationFailed(found[0]["field"] + ": " + found[0]["message"], details=found)
    return form
