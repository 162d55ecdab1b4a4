"""Conditions and merge variables over the run's context: an ``http_request``'s JSON answer
decides a condition branch and fills a message (FN-15 over context values), and the validator
names the node and the rule for paths that point nowhere (FN-25, FN-26)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select, update

from app.engines.funnels.contacts.segments import ContactFacts, ContextIs, compile_sql, evaluate
from app.engines.funnels.definitions.graph import decode_definition
from app.engines.funnels.definitions.problems import KnownNames
from app.engines.funnels.definitions.validate import validate
from app.engines.funnels.models import RUN_COMPLETED, Contact
from app.engines.funnels.outbox.work.render import render, variables
from app.engines.funnels.runs.work.context import MISSING, compare, lookup
from app.platform.models import Workspace
from tests.engines.funnels.factories import (
    Space,
    contact,
    content,
    graph,
    node,
    published,
    runs_of,
    steps_of,
)
from tests.engines.funnels.outside.conftest import Outside

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def checked(url: str = "https://crm.example/check/{{first_name}}") -> dict[str, Any]:
    return graph(
        node("http_request", "call", url=url, method="GET", next="vip"),
        node(
            "condition",
            "vip",
            predicate={"kind": "context", "path": "http.call.data.path", "op": "eq"}
            | {"value": "/check/Ada"},
            yes="welcome_vip",
            no="welcome",
        ),
        node(
            "send_email",
            "welcome_vip",
            subject="Score {{http.call.data.score}} for {{first_name}}",
            body="Status {{ http.call.status }}; ok={{http.call.data.ok}}",
        ),
        node("send_email", "welcome", subject="Hello {{first_name}}", body="Welcome."),
        triggers=[{"kind": "contact_created"}],
    )


async def test_http_response_decides_the_condition_branch(outside: Outside, space: Space) -> None:
    """FN-15 over context: the JSON an ``http_request`` got back sends Ada down the yes branch and
    Bob down the no branch; the message reads values of that answer as merge variables."""
    ws = space.workspace_id
    outside.echo()
    async with outside.runtime.db.write() as uow:
        await uow.session.execute(
            update(Workspace).where(Workspace.id == ws).values(allow_private_http=True)
        )
    url = outside.sims.urls["echo"] + "/check/{{first_name}}"
    funnel_id, _ = await published(outside.runtime, ws, checked(url))
    await contact(outside.runtime, ws, "ada@example.com", first_name="Ada")
    await contact(outside.runtime, ws, "bob@example.com", first_name="Bob")
    await outside.drive()
    runs = await runs_of(outside.runtime, funnel_id)
    assert {r.status for r in runs} == {RUN_COMPLETED}
    decisions = {}
    for run in runs:
        for step in await steps_of(outside.runtime, run.id):
            if step.node_id == "vip":
                decisions[run.contact_id] = step.decision
    async with outside.runtime.db.read() as s:
        names = {r[0]: r[1] for r in await s.execute(select(Contact.id, Contact.first_name))}
    assert {names[c]: d for c, d in decisions.items()} == {"Ada": "yes", "Bob": "no"}
    by_subject = {m.subject: m for m in outside.sink.messages}
    assert set(by_subject) == {"Score 42 for Ada", "Hello Bob"}
    assert (
        content(by_subject["Score 42 for Ada"].body) == "Status 201; ok=true"
    )  # the echo target answers 201


def _problems(definition: dict[str, Any], **known: Any) -> list[tuple[str, str, str | None]]:
    found = validate(decode_definition(definition), KnownNames(**known))
    return [(p.rule, p.code, p.node_id) for p in found]


def _messages(definition: dict[str, Any]) -> list[str]:
    return [p.message for p in validate(decode_definition(definition), KnownNames())]


def test_validator_accepts_context_paths_to_earlier_nodes() -> None:
    assert _problems(checked()) == []


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("http.nope.status", "'http.nope.status': 'nope' is not a http_request node of this graph"),
        ("http.welcome.status", "'welcome' is not a http_request node"),
        ("bookings.call.start", "'call' is not a book_slot node"),
        ("vars.intro", "no ai_generate node fills the variable 'intro'"),
        ("cookies.call", "must start with one of: bookings, http, payments, vars"),
        ("http", "needs a root and a name"),
    ],
)
def test_validator_names_the_condition_and_the_rule_for_bad_paths(path: str, message: str) -> None:
    """FN-26: a context path must name a value some node of this graph produces."""
    definition = checked()
    definition["nodes"][1]["predicate"] = {"kind": "context", "path": path, "op": "exists"}
    assert _problems(definition) == [("FN-26", "context", "vip")]
    assert message in _messages(definition)[0]


def test_validator_refuses_a_path_to_a_node_that_runs_later() -> None:
    """The value must exist when the condition reads it: its producer runs before."""
    definition = graph(
        node(
            "condition",
            "first",
            predicate={"kind": "context", "path": "http.call.status", "op": "eq", "value": 200},
            yes="call",
            no="call",
        ),
        node("http_request", "call", url="https://crm.example/x"),
    )
    assert _problems(definition) == [("FN-26", "context", "first")]
    assert "'call' does not run before this node" in _messages(definition)[0]


def test_validator_refuses_context_outside_a_run() -> None:
    """Entry predicates, goals and segment triggers are evaluated without a run."""
    context = {"kind": "context", "path": "http.call.status", "op": "eq", "value": 200}
    definition = checked()
    definition["entry_predicate"] = context
    definition["nodes"].append({"kind": "goal", "id": "g", "predicate": context})
    definition["nodes"][3]["next"] = "g"
    definition["triggers"].append({"kind": "segment_enter", "predicate": context})
    problems = validate(decode_definition(definition), KnownNames())
    assert {(p.rule, p.node_id) for p in problems} == {("FN-26", None), ("FN-26", "g")}
    assert len(problems) == 3
    assert all("exists only inside a run" in p.message for p in problems)


def test_merge_variables_over_context_are_checked() -> None:
    """FN-25: ``{{http.<node>…}}`` must name an earlier http_request node."""
    definition = checked()
    definition["nodes"][3]["body"] = "Hi {{http.cal.status}}"
    problems = validate(decode_definition(definition), KnownNames())
    assert [(p.rule, p.code, p.node_id) for p in problems] == [
        ("FN-25", "merge_variable", "welcome")
    ]


def test_context_comparisons_are_two_valued() -> None:
    context = {"http": {"c": {"status": 200, "data": {"plan": "pro", "tags": ["a"], "n": None}}}}
    assert lookup(context, "http.c.data.plan") == "pro"
    assert lookup(context, "http.c.data.tags.0") == "a"
    assert lookup(context, "http.c.data.missing") is MISSING
    assert compare("eq", 200, 200.0)
    assert compare("gte", 200, 199)
    assert not compare("gt", "200", 100)  # a string is not a number
    assert compare("ne", "200", 200)
    assert compare("contains", ["a", "b"], "a")
    assert compare("contains", "premium plan", "plan")
    assert not compare("eq", MISSING, None)
    assert not compare("lt", MISSING, 5)
    assert compare("not_exists", None, None)
    assert compare("not_exists", MISSING, None)
    assert not compare("exists", None, None)


async def test_context_predicates_agree_outside_a_run(outside: Outside, space: Space) -> None:
    """SQL and Python agree on a contact outside any run: only ``not_exists`` holds."""
    ws = space.workspace_id
    await contact(outside.runtime, ws, "ada@example.com")
    facts = ContactFacts(attributes={}, fields={})
    async with outside.runtime.db.read() as s:
        for op in ("eq", "exists", "not_exists"):
            predicate = ContextIs(path="http.c.status", op=op, value=200)
            sql = compile_sql(predicate, workspace_id=ws, now=NOW, custom={})
            matched = list(
                await s.scalars(select(Contact.id).where(Contact.workspace_id == ws, sql))
            )
            assert bool(matched) == evaluate(predicate, facts, now=NOW, custom={})
            assert bool(matched) == (op == "not_exists")


def test_render_reads_context_values() -> None:
    person = Contact(first_name="Ada", last_name="L", email="a@x", fields={}, timezone="UTC")
    values = variables(person, {"http": {"c": {"data": {"plan": "pro", "n": 3}}}})
    text = "{{first_name}}: {{http.c.data.plan}} x{{http.c.data.n}} {{http.c.data}}{{http.c.no}}."
    assert render(text, values) == 'Ada: pro x3 {"n":3,"plan":"pro"}.'
