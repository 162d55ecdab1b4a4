"""FN-10: segment predicates compile to SQL and evaluate in Python, and the two agree.

The property test generates predicates with hypothesis and compares, for a fixed population of
varied contacts in the real database (SQLite or PostgreSQL), the SQL membership with the Python
evaluation of each contact. Hypothesis drives a synchronous test; the queries run on an event
loop in a helper thread with its own connection pool.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Coroutine, Iterator
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from app.db.session import Database
from app.engines.funnels.contacts.events import record_event
from app.engines.funnels.contacts.facts import load_facts
from app.engines.funnels.contacts.fields import define_field, field_types
from app.engines.funnels.contacts.segments import (
    AllOf,
    AnyOf,
    EventCount,
    EventIs,
    FieldIs,
    HasTag,
    InList,
    Not,
    Predicate,
    compile_sql,
    decode_predicate,
    evaluate,
)
from app.engines.funnels.contacts.store import ContactData, create_contact
from app.engines.funnels.models import Contact
from app.settings import Settings
from tests.conftest import START
from tests.engines.funnels.factories import Space

T = TypeVar("T")

FIELDS = {"orders": "number", "vip": "boolean", "birthday": "date", "city": "text"}
CITIES = ["Berlin", "berlin", "Ankara", "New York", "Ümraniye", "a%b_c"]
TAGS = ["a", "b", "c"]
LISTS = ["L1", "L2"]
EVENTS = ["order", "visit"]


class LoopThread:
    """An event loop in a thread, for running database calls from synchronous test code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def population(settings: Settings, space: Space) -> Iterator[tuple[LoopThread, Database, int]]:
    helper = LoopThread()
    db = helper.run(_make_db(settings))
    helper.run(_seed(db, space.workspace_id))
    try:
        yield helper, db, space.workspace_id
    finally:
        helper.run(db.dispose())
        helper.close()


async def _make_db(settings: Settings) -> Database:
    return Database(settings.database)


async def _seed(db: Database, ws: int) -> None:
    rnd = random.Random(20260302)
    async with db.write() as uow:
        s = uow.session
        for key, kind in FIELDS.items():
            await define_field(s, ws, key, kind)
        for i in range(40):
            fields: dict[str, Any] = {}
            if rnd.random() < 0.8:
                fields["orders"] = rnd.choice([0, 1, 2, 3, 5, 2.5, -1])
            if rnd.random() < 0.7:
                fields["vip"] = rnd.random() < 0.5
            if rnd.random() < 0.7:
                fields["birthday"] = (
                    START.date() - timedelta(days=rnd.randint(0, 4000))
                ).isoformat()
            if rnd.random() < 0.8:
                fields["city"] = rnd.choice(CITIES)
            contact = await create_contact(
                s,
                ws,
                ContactData(
                    email=f"p{i}@example.com" if rnd.random() < 0.9 else None,
                    first_name=rnd.choice(["Ada", "Grace", "", "Alan"]),
                    fields=fields,
                    tags=[t for t in TAGS if rnd.random() < 0.4],
                    lists=[x for x in LISTS if rnd.random() < 0.4],
                ),
                START,
            )
            for _ in range(rnd.randint(0, 5)):
                await record_event(
                    s,
                    workspace_id=ws,
                    contact_id=contact.id,
                    name=rnd.choice(EVENTS),
                    source="api",
                    now=START,
                    occurred_at=START
                    - timedelta(days=rnd.randint(0, 60), hours=rnd.randint(0, 23)),
                )


async def _both(
    db: Database, ws: int, predicate: Predicate, now: datetime
) -> tuple[set[int], set[int]]:
    async with db.read() as s:
        custom = await field_types(s, ws)
        base = select(Contact).where(Contact.workspace_id == ws, Contact.deleted_at.is_(None))
        contacts = list(await s.scalars(base))
        facts = await load_facts(s, contacts, event_names=set(EVENTS), since=None)
        python = {
            c.id for c in contacts if evaluate(predicate, facts[c.id], now=now, custom=custom)
        }
        sql = set(
            await s.scalars(
                select(Contact.id).where(
                    Contact.workspace_id == ws,
                    Contact.deleted_at.is_(None),
                    compile_sql(predicate, workspace_id=ws, now=now, custom=custom),
                )
            )
        )
    return python, sql


def _dates() -> st.SearchStrategy[str]:
    return st.integers(0, 4000).map(lambda d: (START.date() - timedelta(days=d)).isoformat())


LEAVES: st.SearchStrategy[Predicate] = st.one_of(
    st.builds(
        FieldIs,
        field=st.just("orders"),
        op=st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte", "exists", "not_exists"]),
        value=st.sampled_from([0, 1, 2, 2.5, 3, -1]),
    ),
    st.builds(
        FieldIs,
        field=st.just("vip"),
        op=st.sampled_from(["eq", "ne", "exists", "not_exists"]),
        value=st.booleans(),
    ),
    st.builds(
        FieldIs,
        field=st.just("birthday"),
        op=st.sampled_from(["eq", "gt", "gte", "lt", "lte", "not_exists"]),
        value=_dates(),
    ),
    st.builds(
        FieldIs,
        field=st.sampled_from(["city", "first_name", "email"]),
        op=st.sampled_from(["eq", "ne", "contains", "exists", "not_exists"]),
        value=st.sampled_from([*CITIES, "ber", "Ber", "%", "_", "Ada", "example", "ü", "Ü", ""]),
    ),
    st.builds(HasTag, tag=st.sampled_from([*TAGS, "zzz"])),
    st.builds(InList, list=st.sampled_from([*LISTS, "L9"])),
    st.builds(
        EventCount,
        event=st.sampled_from(EVENTS),
        op=st.sampled_from(["eq", "gt", "gte", "lt", "lte"]),
        count=st.integers(0, 4),
        within_days=st.one_of(st.none(), st.integers(1, 90)),
    ),
    # Outside an event filter there is no event: both evaluators hold only "not_exists".
    st.builds(
        EventIs,
        property=st.just("plan"),
        op=st.sampled_from(["eq", "ne", "gt", "exists", "not_exists", "contains"]),
        value=st.just("pro"),
    ),
)

PREDICATES: st.SearchStrategy[Predicate] = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3).map(lambda ps: AllOf(predicates=ps)),
        st.lists(children, min_size=1, max_size=3).map(lambda ps: AnyOf(predicates=ps)),
        children.map(lambda p: Not(predicate=p)),
    ),
    max_leaves=6,
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(predicate=PREDICATES)
def test_fn10_sql_and_python_agree(
    population: tuple[LoopThread, Database, int], predicate: Predicate
) -> None:
    """FN-10: for every generated predicate, SQL membership equals Python evaluation."""
    helper, db, ws = population
    python, sql = helper.run(_both(db, ws, predicate, START))
    assert python == sql, predicate


def test_fn10_predicate_json_round_trip() -> None:
    raw = {
        "kind": "all",
        "predicates": [
            {"kind": "event_count", "event": "order", "op": "gte", "count": 3},
            {
                "kind": "not",
                "predicate": {
                    "kind": "event_count",
                    "event": "visit",
                    "count": 1,
                    "within_days": 90,
                },
            },
            {"kind": "field", "field": "orders", "op": "gt", "value": 100},
        ],
    }
    predicate = decode_predicate(raw)
    assert isinstance(predicate, AllOf)
    assert isinstance(predicate.predicates[1], Not)
