"""Every input bounded (issue 13, item 4): each string, list and map field of every JSON body an
API operation accepts declares a maximum length (or an anchored pattern of bounded length), each
integer a range, and
an e-mail address field holds an e-mail address, checked with a maintained validator."""

from __future__ import annotations

import re

import httpx
import msgspec
import msgspec.inspect as mi
import pytest
from litestar import Litestar

from app.platform.validation import email_problem
from app.runtime import Runtime
from app.settings import Settings
from app.web.access import PUBLIC, route_handlers
from app.web.app import create_app
from tests.conftest import auth
from tests.factories import Tenant

# An anchored pattern whose quantifiers are all bounded ({m,n}, ?) bounds the length by itself.
_UNBOUNDED_QUANTIFIER = re.compile(r"(?<!\\)[*+]|\{\d+,\}")


def _bounded_by_pattern(pattern: str | None) -> bool:
    return bool(
        pattern
        and pattern.startswith("^")
        and pattern.endswith("$")
        and not _UNBOUNDED_QUANTIFIER.search(pattern)
    )


def unbounded_fields(t: mi.Type, where: str, seen: frozenset[type]) -> list[str]:
    found: list[str] = []
    if isinstance(t, mi.IntType):
        # A number beyond the column's 64 bits overflows in the database (a 500 before).
        if (t.le is None and t.lt is None) or (t.ge is None and t.gt is None):
            found.append(f"{where} (int)")
    elif isinstance(t, mi.StrType):
        if t.max_length is None and not _bounded_by_pattern(t.pattern):
            found.append(where)
    elif isinstance(t, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType):
        if t.max_length is None:
            found.append(where)
        found += unbounded_fields(t.item_type, f"{where}[]", seen)
    elif isinstance(t, mi.DictType):
        if t.max_length is None:
            found.append(where)
        found += unbounded_fields(t.key_type, f"{where}{{key}}", seen)
        found += unbounded_fields(t.value_type, f"{where}{{value}}", seen)
    elif isinstance(t, mi.UnionType):
        for member in t.types:
            found += unbounded_fields(member, where, seen)
    elif isinstance(t, mi.StructType) and t.cls not in seen:
        for f in t.fields:
            found += unbounded_fields(f.type, f"{t.cls.__qualname__}.{f.name}", seen | {t.cls})
    elif isinstance(t, mi.Metadata):
        found += unbounded_fields(t.type, where, seen)
    return found


@pytest.fixture
def app(settings: Settings, runtime: Runtime) -> Litestar:
    return create_app(settings, runtime, background=False)


def test_every_api_body_field_has_a_length_bound(app: Litestar) -> None:
    bodies = 0
    problems: list[str] = []
    for path, handler in route_handlers(app):
        data = handler.parsed_fn_signature.parameters.get("data")
        if data is None or handler.opt.get(PUBLIC) or not path.startswith("/api/"):
            continue
        bodies += 1
        for field in unbounded_fields(mi.type_info(data.annotation), path, frozenset()):
            problems.append(f"{sorted(handler.http_methods)} {path}: {field}")
    assert bodies > 40
    assert not problems, "fields without a length bound:\n" + "\n".join(sorted(set(problems)))


@pytest.mark.parametrize(
    "address",
    ["ada@example.com", "admin@demo.local", "ölist@exämple.de", "first.last+tag@sub.example.org"],
)
def test_addresses_the_validator_accepts(address: str) -> None:
    assert email_problem(address) is None


@pytest.mark.parametrize(
    "address",
    [
        "no-at-sign",
        "two@@example.com",
        "spaces in@example.com",
        "a@",
        "@example.com",
        "x@" + "a" * 300 + ".com",
        "nul\x00@example.com",
        "Ada <ada@example.com>",
    ],
)
def test_addresses_the_validator_refuses(address: str) -> None:
    assert email_problem(address) is not None


async def test_a_contact_with_a_huge_name_or_a_bad_address_is_refused(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """The audit's 1,000,000-character first name and an address that only has an ``@``."""
    huge = await client.post(
        "/api/v1/funnels/contacts",
        json={"email": "ada@example.com", "first_name": "A" * 1_000_000},
        headers=auth(tenant),
    )
    assert huge.status_code == 422
    assert huge.json()["code"] == "validation_failed"
    bad = await client.post(
        "/api/v1/funnels/contacts", json={"email": "a@b@c"}, headers=auth(tenant)
    )
    assert bad.status_code == 422
    assert "email" in bad.text, bad.text
    good = await client.post(
        "/api/v1/funnels/contacts", json={"email": "ada@example.com"}, headers=auth(tenant)
    )
    assert good.status_code == 201, good.text


def test_an_email_field_is_checked_on_decode() -> None:
    from app.engines.funnels.schemas import ContactIn

    with pytest.raises(msgspec.ValidationError, match="email"):
        msgspec.json.decode(b'{"email": "not an address"}', type=ContactIn)
