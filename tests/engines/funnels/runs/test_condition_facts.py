"""The facts a batch of runs loads for its conditions and goals: what their predicates read
(tags, lists, events within a window), nothing else, and every condition still decided as
if everything had been loaded (FN-15, FN-18)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event

from app.engines.funnels.contacts.segments import (
    AllOf,
    AnyOf,
    EventCount,
    FactsWanted,
    FieldIs,
    HasTag,
    InList,
    InSegment,
    Not,
    Predicate,
    facts_wanted,
)
from app.engines.funnels.models import Contact
from app.engines.funnels.runs.due.entry import enter
from tests.engines.funnels.factories import (
    Engine,
    Space,
    contact,
    email_node,
    graph,
    node,
    published,
    setup_names,
)


def test_facts_wanted_names_what_the_predicates_read_however_deeply_nested() -> None:
    assert facts_wanted([FieldIs(field="first_name", op="eq", value="A")]) == FactsWanted()
    assert facts_wanted([Not(predicate=AnyOf(predicates=[HasTag(tag="vip")]))]) == FactsWanted(
        tags=True
    )
    saved = InSegment(segment_id=1, predicate=AllOf(predicates=[InList(list="news")]))
    assert facts_wanted([saved]) == FactsWanted(lists=True)
    counted: list[Predicate] = [
        EventCount(event="opened", within_days=7),
        AnyOf(predicates=[EventCount(event="paid", within_days=30), HasTag(tag="vip")]),
    ]
    assert facts_wanted(counted) == FactsWanted(
        tags=True, event_names=frozenset({"opened", "paid"}), within_days=30
    )
    # One predicate counting all of history makes the whole set read all of it.
    assert facts_wanted([*counted, EventCount(event="clicked")]).within_days is None


@pytest.fixture
def statements(engine: Engine) -> Iterator[list[str]]:
    """The SQL the test's database is sent while the fixture is in use."""
    sent: list[str] = []
    target = engine.runtime.db.write_engine.sync_engine

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement.lower())

    event.listen(target, "before_cursor_execute", before)
    yield sent
    event.remove(target, "before_cursor_execute", before)


def _reads(sent: list[str], table: str) -> bool:
    return any(s.lstrip().startswith("select") and f" {table}" in s for s in sent)


async def test_fn15_a_batch_reads_only_the_facts_its_conditions_test(
    engine: Engine, space: Space, statements: list[str]
) -> None:
    """A condition on a field reads no tags, lists or events; another funnel's condition on a
    tag in the same batch has the tags read, and each contact goes the way its facts say."""
    ws = space.workspace_id
    await setup_names(engine.runtime, ws, tags=["vip"], lists=["news"])
    by_field = graph(
        node(
            "condition",
            "c",
            predicate={"kind": "field", "field": "first_name", "op": "eq", "value": "Ann"},
            yes="y",
            no="n",
        ),
        email_node("y", subject="field yes"),
        email_node("n", subject="field no"),
    )
    by_tag = graph(
        node(
            "condition",
            "c",
            predicate={"kind": "not", "predicate": {"kind": "has_tag", "tag": "vip"}},
            yes="y",
            no="n",
        ),
        email_node("y", subject="not vip"),
        email_node("n", subject="vip"),
    )
    _, field_version = await published(engine.runtime, ws, by_field, name="by field")
    _, tag_version = await published(engine.runtime, ws, by_tag, name="by tag")
    ann = await contact(engine.runtime, ws, "ann@x.test", first_name="Ann", tags=["vip"])
    bob = await contact(engine.runtime, ws, "bob@x.test", first_name="Bob", lists=["news"])

    async with engine.runtime.db.write() as uow:
        for cid in (ann, bob):
            await enter(uow.session, version=field_version, contact_id=cid, now=engine.clock.now())
    statements.clear()
    await engine.runner.run_batch(owner="facts", now=engine.clock.now())
    assert not _reads(statements, "contact_tags")
    assert not _reads(statements, "list_members")
    assert not _reads(statements, "contact_events")

    async with engine.runtime.db.write() as uow:
        for cid in (ann, bob):
            await enter(uow.session, version=tag_version, contact_id=cid, now=engine.clock.now())
    statements.clear()
    await engine.runner.run_batch(owner="facts", now=engine.clock.now())
    assert _reads(statements, "contact_tags")
    assert not _reads(statements, "list_members")

    await engine.drive()
    got = sorted((m.to[0], m.subject) for m in engine.sink.messages)
    assert got == [
        ("ann@x.test", "field yes"),
        ("ann@x.test", "vip"),
        ("bob@x.test", "field no"),
        ("bob@x.test", "not vip"),
    ]


def test_facts_wanted_names_a_comparison_of_a_custom_field() -> None:
    standard = FieldIs(field="first_name", op="eq", value="A")
    custom = FieldIs(field="score", op="gt", value=9)
    assert not facts_wanted([standard]).field_types
    assert facts_wanted([AnyOf(predicates=[standard, Not(predicate=custom)])]).field_types


async def test_fn15_custom_fields_are_read_and_set_by_their_type_and_others_read_no_types(
    engine: Engine, space: Space, statements: list[str]
) -> None:
    """A condition on a custom number field compares numbers (10 > 9, which as text it is
    not) and a set_field stores a number; a batch of a graph that tests and sets only standard
    attributes does not read the workspace's field definitions."""
    ws = space.workspace_id
    await setup_names(engine.runtime, ws, fields={"score": "number"})
    typed = graph(
        node(
            "condition",
            "c",
            predicate={"kind": "field", "field": "score", "op": "gt", "value": 9},
            yes="y",
            no="n",
        ),
        email_node("y", subject="high"),
        email_node("n", subject="low"),
    )
    sets = graph(node("set_field", "f", field="score", value=12, next="e"), email_node("e"))
    standard = graph(
        node("set_field", "f", field="last_name", value="Doe", next="e"), email_node("e")
    )
    _, typed_version = await published(engine.runtime, ws, typed, name="typed")
    _, sets_version = await published(engine.runtime, ws, sets, name="sets")
    _, standard_version = await published(engine.runtime, ws, standard, name="standard")
    ann = await contact(engine.runtime, ws, "ann@x.test", fields={"score": 10})
    bob = await contact(engine.runtime, ws, "bob@x.test")

    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=standard_version, contact_id=bob, now=engine.clock.now())
    statements.clear()
    await engine.runner.run_batch(owner="types", now=engine.clock.now())
    assert not _reads(statements, "contact_fields")

    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=typed_version, contact_id=ann, now=engine.clock.now())
        await enter(uow.session, version=sets_version, contact_id=bob, now=engine.clock.now())
    statements.clear()
    await engine.runner.run_batch(owner="types", now=engine.clock.now())
    assert _reads(statements, "contact_fields")
    await engine.drive()
    assert ("ann@x.test", "high") in {(m.to[0], m.subject) for m in engine.sink.messages}
    async with engine.runtime.db.read() as s:
        stored = await s.get(Contact, bob)
    assert stored is not None
    assert (stored.fields, stored.last_name) == ({"score": 12}, "Doe")
