"""Hosted forms (the ``form_submit`` trigger): a form has an unguessable public id, is served by the
app at ``/t/f/<public id>`` and can be embedded in any page as plain HTML posting there.

A submission is checked (an e-mail address, the required fields) and stored as an inbound event
— nothing else happens on the request path. Each rendered form carries a fresh submission id, the
event's idempotency key, so a double click or a resubmitted page stores one event.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any

from sqlalchemy import select

from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.events.models import Form
from app.errors import NotFound, ValidationFailed

RESERVED = {"email", "submission_id"}


class FormNotFound(NotFound):
    code = "form_not_found"


@dataclass(frozen=True, slots=True)
class FormField:
    key: str
    label: str
    required: bool = False


def _check_fields(fields: Sequence[FormField]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, f in enumerate(fields):
        if not f.key.isidentifier() or f.key in RESERVED or f.key in seen:
            raise ValidationFailed.field(
                f"fields[{i}].key", "a unique identifier (email is always asked)"
            )
        seen.add(f.key)
        out.append({"key": f.key, "label": f.label or f.key, "required": f.required})
    return out


async def create_form(
    session: WriteSession,
    workspace_id: int,
    *,
    name: str,
    fields: Sequence[FormField],
    now: datetime,
    add_tag: str | None = None,
    add_list: str | None = None,
    success_message: str = "Thank you!",
) -> Form:
    if not name.strip():
        raise ValidationFailed.field("name", "must not be empty")
    form = Form(
        workspace_id=workspace_id,
        public_id=secrets.token_urlsafe(12),
        name=name.strip(),
        fields=_check_fields(fields),
        add_tag=add_tag or None,
        add_list=add_list or None,
        success_message=success_message or "Thank you!",
        created_at=now,
    )
    session.add(form)
    await session.flush()
    return form


async def list_forms(session: ReadSession, workspace_id: int) -> list[Form]:
    return list(await session.scalars(scoped_select(Form, workspace_id).order_by(Form.id.desc())))


async def public_form(session: ReadSession, public_id: str) -> Form:
    form = await session.scalar(select(Form).where(Form.public_id == public_id))
    if form is None:
        raise FormNotFound("no such form")
    return form


def submission(form: Form, posted: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """The submission id and the values to store; refuses a missing e-mail or required field."""
    email = str(posted.get("email", "")).strip()
    if "@" not in email or len(email) > 320:
        raise ValidationFailed.field("email", "an e-mail address is required")
    values: dict[str, str] = {"email": email}
    for field in form.fields:
        raw = str(posted.get(field["key"], "")).strip()[:1000]
        if field.get("required") and not raw:
            raise ValidationFailed.field(field["key"], f"{field['label']} is required")
        if raw:
            values[field["key"]] = raw
    submission_id = str(posted.get("submission_id", "")).strip()[:64]
    return submission_id or secrets.token_urlsafe(12), values


def form_html(form: Form, action: str) -> str:
    """The form's markup (hosted page and embed code share it)."""
    rows = [
        '<label>E-mail <input type="email" name="email" required></label>',
        *(
            f'<label>{escape(f["label"])} <input name="{escape(f["key"])}"'
            + (" required" if f.get("required") else "")
            + "></label>"
            for f in form.fields
        ),
    ]
    inputs = "\n  ".join(rows)
    return (
        f'<form method="post" action="{escape(action)}" class="sweepline-form">\n'
        f'  <input type="hidden" name="submission_id" value="{secrets.token_urlsafe(12)}">\n'
        f"  {inputs}\n"
        '  <button type="submit">Send</button>\n'
        "</form>"
    )


def embed_code(form: Form, base_url: str) -> str:
    """HTML to paste into any page. The submission id is left out: the server makes one."""
    html = form_html(form, f"{base_url.rstrip('/')}/t/f/{form.public_id}")
    return "\n".join(line for line in html.splitlines() if "submission_id" not in line)
