"""A text column's length binds every write on both databases (app/db/column_bounds.py).

PostgreSQL answered an over-long value with a server error and SQLite stored it: a form whose tag
the API let through at 200 characters into a 100-character column was a 500 in server mode only.
Every unit-of-work write is measured against its column now, and each API body field that is
stored in a bounded column declares a bound that fits it, so the document tells the truth."""

from __future__ import annotations

import re

import httpx
import msgspec.inspect as mi
import pytest
from litestar import Litestar
from sqlalchemy import String, func, select

from app.clock import SystemClock
from app.db.base import Base
from app.engines.funnels.events.models import Form
from app.errors import ValidationFailed
from app.runtime import Runtime
from app.settings import Settings
from app.web.access import PUBLIC, route_handlers
from app.web.app import create_app
from tests.conftest import auth
from tests.factories import Tenant

# Body fields stored in a shorter column after the code rewrites them: a keyword is normalised
# (spaces folded) and a language given by name becomes its code, each measured after that.
_REWRITTEN_BEFORE_STORING = {
    ("AnnotationIn", "keyword"),
    ("ScheduleEdit", "language_code"),
}
_SUFFIX = re.compile(r"(In|Edit|Patch|Create|Update)$")


def _form(tenant: Tenant, **values: str) -> Form:
    return Form(
        workspace_id=tenant.workspace_id,
        public_id="f" * 12,
        name=values.get("name", "Newsletter"),
        fields=[],
        add_tag=values.get("add_tag"),
        add_list=values.get("add_list"),
        success_message="Thanks",
        created_at=SystemClock().now(),
    )


async def _set_list(runtime: Runtime, add_list: str) -> None:
    async with runtime.db.write() as uow:
        form = await uow.session.scalar(select(Form))
        assert form is not None
        form.add_list = add_list


async def _forms(runtime: Runtime) -> int:
    async with runtime.db.read() as session:
        return int(await session.scalar(select(func.count()).select_from(Form)) or 0)


async def test_an_insert_longer_than_its_column_is_refused_and_nothing_is_written(
    runtime: Runtime, tenant: Tenant
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        async with runtime.db.write() as uow:
            uow.session.add(_form(tenant, add_tag="t" * 101))
    assert refused.value.details == [
        {
            "field": "add_tag",
            "message": "must be at most 100 characters (got 101)",
            "code": "too_long",
        }
    ]
    assert await _forms(runtime) == 0
    async with runtime.db.write() as uow:
        uow.session.add(_form(tenant, add_tag="t" * 100, name="n" * 200))
    assert await _forms(runtime) == 1


async def test_an_update_longer_than_its_column_is_refused_and_the_row_keeps_its_value(
    runtime: Runtime, tenant: Tenant
) -> None:
    async with runtime.db.write() as uow:
        uow.session.add(_form(tenant, add_list="members"))
    with pytest.raises(ValidationFailed, match="add_list"):
        await _set_list(runtime, "ü" * 101)
    async with runtime.db.read() as session:
        assert await session.scalar(select(Form.add_list)) == "members"


async def test_the_form_the_fuzzer_found_is_refused_with_a_clear_error(
    client: httpx.AsyncClient, tenant: Tenant, runtime: Runtime
) -> None:
    """The body that answered 500 on PostgreSQL: a 130-character list name."""
    body = {"name": "è\x9b", "add_tag": "add_tag", "add_list": "Hello {{first_name}}, " * 6}
    got = await client.post("/api/v1/funnels/forms", json=body, headers=auth(tenant))
    assert got.status_code == 422, got.text
    assert "add_list" in got.text
    assert await _forms(runtime) == 0
    fits = await client.post(
        "/api/v1/funnels/forms", json={**body, "add_list": "l" * 100}, headers=auth(tenant)
    )
    assert fits.status_code == 201, fits.text


def _str_bounds(struct: mi.StructType) -> dict[str, int | None]:
    bounds: dict[str, int | None] = {}
    for f in struct.fields:
        t = f.type
        if isinstance(t, mi.UnionType):
            members = [m for m in t.types if not isinstance(m, mi.NoneType)]
            t = members[0] if len(members) == 1 else t
        if isinstance(t, mi.Metadata):
            t = t.type
        if isinstance(t, mi.StrType):
            bounds[f.name] = t.max_length
    return bounds


def _column_lengths() -> dict[str, dict[str, int]]:
    """Mapped class name -> {column: characters} of its bounded text columns."""
    lengths: dict[str, dict[str, int]] = {}
    for mapper in Base.registry.mappers:
        for column in mapper.columns:
            if isinstance(column.type, String) and column.type.length:
                lengths.setdefault(mapper.class_.__name__, {})[column.key] = column.type.length
    return lengths


def test_every_body_field_stored_in_a_bounded_column_declares_a_bound_that_fits(
    settings: Settings, runtime: Runtime
) -> None:
    """A body struct ``FormIn`` is stored as ``Form``; each of its text fields that has a column of
    the same name there is bounded at most as long as that column."""
    app: Litestar = create_app(settings, runtime, background=False)
    columns = _column_lengths()
    paired, problems = 0, []
    for path, handler in route_handlers(app):
        data = handler.parsed_fn_signature.parameters.get("data")
        if data is None or handler.opt.get(PUBLIC) or not path.startswith("/api/"):
            continue
        info = mi.type_info(data.annotation)
        if not isinstance(info, mi.StructType):
            continue
        name = info.cls.__name__
        stored_as = columns.get(_SUFFIX.sub("", name), {})
        for field, bound in _str_bounds(info).items():
            if field not in stored_as or (name, field) in _REWRITTEN_BEFORE_STORING:
                continue
            paired += 1
            if bound is None or bound > stored_as[field]:
                problems.append(f"{path} {name}.{field}: {bound} > column {stored_as[field]}")
    assert paired > 10
    assert not problems, "\n".join(sorted(set(problems)))
