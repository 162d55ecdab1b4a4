"""``ContactFacts.in_run``: the same facts with a run's context, every other field kept."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from app.engines.funnels.contacts.segments import ContactFacts


def test_in_run_is_replace_of_the_context_alone() -> None:
    facts = ContactFacts(
        attributes={"email": "a@x.test"},
        fields={"plan": "pro"},
        tags=frozenset({"vip"}),
        lists=frozenset({"news"}),
        events=(("opened", datetime(2026, 3, 2, tzinfo=UTC)),),
        context={"old": 1},
        event={"amount": 5},
    )
    # A field added to the facts must be carried by in_run too: this list is the reminder.
    assert [f.name for f in dataclasses.fields(ContactFacts)] == [
        "attributes",
        "fields",
        "tags",
        "lists",
        "events",
        "context",
        "event",
    ]
    context = {"vars": {"x": 2}}
    assert facts.in_run(context) == dataclasses.replace(facts, context=context)
    assert facts.context == {"old": 1}
