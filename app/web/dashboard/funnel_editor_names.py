"""Tags, lists and custom fields created from inside the funnel editor (FN-80): a step naming one
that does not exist yet offers to create it in place, through the same services as the Tags,
lists and fields page, so a new name no longer blocks publishing. Refusals are worded for the
person at the editor (the thing's name and what is allowed), never a request path."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from litestar import post
from litestar.params import FromPath, JSONBody

from app.engines.funnels.contacts.fields import define_field, field_types
from app.engines.funnels.contacts.memberships import ensure_names, names_of
from app.engines.funnels.contacts.segments import STANDARD_FIELDS
from app.engines.funnels.definitions import service
from app.engines.funnels.models import ContactList, Tag
from app.errors import DomainError, ValidationFailed
from app.web.auth import CurrentPrincipal
from app.web.dashboard.common import error_message
from app.web.deps import Writes

PREFIX = "/ui/funnels"

NAME_LIMIT = 100
"""The longest tag or list name, as on the Tags, lists and fields page."""

FIELD_KEY_LIMIT = 64
"""The longest field name (its key), as the fields table stores it."""

_WHAT = {"tag": "Tag", "list": "List", "field": "Field"}


class NewName(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    kind: Literal["tag", "list", "field"]
    name: Annotated[str, msgspec.Meta(max_length=200)]
    type: Annotated[str, msgspec.Meta(max_length=20)] = "text"
    """A field's type (text, number, date, boolean, …); ignored for tags and lists."""


def field_choices(custom: dict[str, str]) -> list[dict[str, str]]:
    """The fields a step may name, as the editor lists them: the standard ones, then custom."""
    return [{"name": n, "type": k} for n, k in sorted(STANDARD_FIELDS.items())] + [
        {"name": n, "type": k} for n, k in sorted(custom.items())
    ]


def _refused(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(
        message, details=[{"field": field, "message": message, "code": "invalid"}]
    )


@post(f"{PREFIX}/{{funnel_id:int}}/names", status_code=201)
async def create_name(
    principal: CurrentPrincipal, uow: Writes, funnel_id: FromPath[int], data: JSONBody[NewName]
) -> dict[str, Any]:
    """Create the tag, list or field a step names; answers the workspace's names of that kind
    (the editor's pickers). The funnel must be the workspace's, like the editor's other calls."""
    ws = principal.workspace_id
    await service.get_funnel(uow.session, ws, funnel_id)
    name = data.name.strip()
    what = _WHAT[data.kind]
    if data.kind == "field":
        if len(name) > FIELD_KEY_LIMIT:
            raise _refused("name", f"Field name: at most {FIELD_KEY_LIMIT} characters.")
        try:
            async with uow.attempt():
                await define_field(uow.session, ws, name, data.type)
        except DomainError as exc:
            labels = {"key": "Field name", "type": "Field type"}
            field = "type" if any(d.get("field") == "type" for d in exc.details or []) else "name"
            raise _refused(field, error_message(exc, labels)) from exc
        custom = await field_types(uow.session, ws)
        return {"kind": "field", "name": name, "fields": field_choices(custom)}
    if not 0 < len(name) <= NAME_LIMIT:
        raise _refused("name", f"{what} name: 1 to {NAME_LIMIT} characters.")
    model: type[Tag] | type[ContactList] = Tag if data.kind == "tag" else ContactList
    await ensure_names(uow.session, model, ws, [name])
    return {
        "kind": data.kind,
        "name": name,
        "names": sorted(await names_of(uow.session, model, ws)),
    }


ROUTES: list[Any] = [create_name]
