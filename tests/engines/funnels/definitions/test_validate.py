"""The validator, FN-21 to FN-26: each rule with a failing and a passing graph; errors name the
node and the rule. Pure: no database."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from app.engines.funnels.definitions.graph import NODE_KINDS, decode_definition
from app.engines.funnels.definitions.problems import KnownNames, Problem
from app.engines.funnels.definitions.validate import validate

KNOWN = KnownNames(
    tags=frozenset({"vip", "customer"}),
    lists=frozenset({"Newsletter"}),
    fields={
        "company": "text",
        "birthday": "date",
        "orders": "number",
        "push_token": "text",
        "address_line1": "text",
        "address_city": "text",
        "address_postal_code": "text",
        "address_country": "text",
    },
    funnels=frozenset({7}),
)


def check(*nodes: dict[str, Any], **extra: Any) -> list[Problem]:
    return validate(decode_definition({"nodes": list(nodes), **extra}), KNOWN)


def rules(problems: list[Problem]) -> set[tuple[str, str | None]]:
    return {(p.rule, p.node_id) for p in problems}


def mail(id: str, **kw: Any) -> dict[str, Any]:
    return {"kind": "send_email", "id": id, "subject": "Hi", "body": "Hello", **kw}


def test_a_good_graph_has_no_problems() -> None:
    assert (
        check(
            mail("a", entry=True, next="w"),
            {"kind": "wait", "id": "w", "days": 1, "next": "c"},
            {
                "kind": "condition",
                "id": "c",
                "predicate": {"kind": "has_tag", "tag": "vip"},
                "yes": "g",
                "no": "a",
            },
            {"kind": "goal", "id": "g"},
        )
        == []
    )


def test_fn21_exactly_one_entry() -> None:
    none = check(mail("a", next="b"), mail("b"))
    assert ("FN-21", None) in rules(none)
    two = check(mail("a", entry=True), mail("b", entry=True))
    assert {("FN-21", "a"), ("FN-21", "b")} <= rules(two)
    assert check(mail("a", entry=True, next="b"), mail("b")) == []


def test_fn22_every_node_reachable() -> None:
    problems = check(mail("a", entry=True), mail("orphan"))
    assert rules(problems) == {("FN-22", "orphan")}
    assert check(mail("a", entry=True, next="b"), mail("b")) == []


def test_fn23_cycle_without_a_wait_is_refused_with_a_wait_accepted() -> None:
    loop = check(mail("a", entry=True, next="b"), mail("b", next="a"))
    assert {("FN-23", "a"), ("FN-23", "b")} == {(r, n) for r, n in rules(loop)}
    self_loop = check(mail("a", entry=True, next="a"))
    assert ("FN-23", "a") in rules(self_loop)
    ok = check(
        mail("a", entry=True, next="w"), {"kind": "wait", "id": "w", "hours": 1, "next": "a"}
    )
    assert ok == []


def test_fn24_every_send_has_its_creative() -> None:
    problems = check(
        {"kind": "send_email", "id": "e", "entry": True, "subject": "", "body": " ", "next": "s"},
        {"kind": "send_sms", "id": "s", "next": "p"},
        {"kind": "send_push", "id": "p", "title": "t", "next": "l"},
        {"kind": "send_letter", "id": "l", "next": "n"},
        {"kind": "notify_team", "id": "n", "subject": "x", "body": "y"},
    )
    by_node = {p.node_id for p in problems if p.rule == "FN-24"}
    assert by_node == {"e", "s", "p", "l", "n"}
    assert any("subject" in p.message for p in problems if p.node_id == "e")
    assert any("body" in p.message for p in problems if p.node_id == "e")
    assert (
        check(
            mail("e", entry=True, next="s"),
            {"kind": "send_sms", "id": "s", "text": "hi", "next": "p"},
            {"kind": "send_push", "id": "p", "title": "t", "body": "b", "next": "l"},
            {"kind": "send_letter", "id": "l", "body": "Dear…", "next": "n"},
            {"kind": "notify_team", "id": "n", "to": ["ops@x.test"], "subject": "x", "body": "y"},
        )
        == []
    )


def test_fn25_unknown_merge_variable_is_reported_with_a_suggestion() -> None:
    problems = check(mail("a", entry=True, body="Hello {{frist_name}} from {{company}}"))
    [problem] = problems
    assert (problem.rule, problem.node_id, problem.code) == ("FN-25", "a", "merge_variable")
    assert "frist_name" in problem.message
    assert "first_name" in problem.message
    produced = check(
        {
            "kind": "ai_generate",
            "id": "g",
            "entry": True,
            "prompt": "p",
            "variable": "intro",
            "next": "a",
        },
        mail("a", body="{{intro}} {{first_name}} {{company}} {{ unsubscribe_url }}"),
    )
    assert produced == []


def test_fn26_edges_point_at_existing_nodes() -> None:
    problems = check(mail("a", entry=True, next="nowhere"))
    assert [(p.rule, p.code, p.node_id) for p in problems] == [("FN-26", "edge", "a")]


def test_fn26_branch_nodes_have_their_branches_and_positive_weights() -> None:
    problems = check(
        {
            "kind": "condition",
            "id": "c",
            "entry": True,
            "predicate": {"kind": "has_tag", "tag": "vip"},
            "yes": "s",
        },
        {
            "kind": "split",
            "id": "s",
            "branches": [{"name": "A", "weight": 0, "next": "g"}, {"name": "B", "weight": 1}],
        },
        {"kind": "goal", "id": "g"},
    )
    codes = {(p.node_id, p.code) for p in problems}
    assert ("c", "branches") in codes
    assert ("s", "weight") in codes
    assert ("s", "branches") in codes  # branch B leads nowhere
    one_branch = check(
        {
            "kind": "split",
            "id": "s",
            "entry": True,
            "branches": [{"name": "A", "weight": 1, "next": "g"}],
        },
        {"kind": "goal", "id": "g"},
    )
    assert ("s", "branches") in {(p.node_id, p.code) for p in one_branch}


def test_fn26_references_exist_in_the_workspace() -> None:
    problems = check(
        {"kind": "add_tag", "id": "t", "entry": True, "tag": "nope", "next": "l"},
        {"kind": "add_to_list", "id": "l", "list": "Nope", "next": "f"},
        {"kind": "set_field", "id": "f", "field": "unknown", "value": 1, "next": "e"},
        {"kind": "enter_funnel", "id": "e", "funnel_id": 99, "next": "c"},
        {
            "kind": "condition",
            "id": "c",
            "predicate": {"kind": "field", "field": "ghost", "op": "eq", "value": "x"},
            "yes": "w",
            "no": "w",
        },
        {"kind": "wait", "id": "w", "field": "company", "hour": 9},
    )
    refs = {p.node_id for p in problems if p.code in {"reference", "predicate"}}
    assert refs == {"t", "l", "f", "e", "c", "w"}
    ok = check(
        {"kind": "add_tag", "id": "t", "entry": True, "tag": "vip", "next": "l"},
        {"kind": "add_to_list", "id": "l", "list": "Newsletter", "next": "f"},
        {"kind": "set_field", "id": "f", "field": "orders", "value": 3, "next": "e"},
        {"kind": "enter_funnel", "id": "e", "funnel_id": 7, "next": "w"},
        {"kind": "wait", "id": "w", "field": "birthday", "offset_days": -7, "hour": 9},
    )
    assert ok == []


def test_fn26_triggers_and_entry_predicate_references() -> None:
    problems = check(
        mail("a", entry=True),
        triggers=[{"kind": "tag_added", "tag": "ghost"}, {"kind": "list_join", "list": "Ghost"}],
        entry_predicate={"kind": "field", "field": "orders", "op": "contains", "value": "x"},
    )
    assert len(problems) == 3
    assert all(p.rule == "FN-26" for p in problems)


def test_fn26_wait_needs_exactly_one_mode_and_valid_hours() -> None:
    two_modes = check(
        {"kind": "wait", "id": "w", "entry": True, "days": 1, "weekday": 2, "hour": 9}
    )
    assert ("w", "wait_mode") in {(p.node_id, p.code) for p in two_modes}
    no_hour = check({"kind": "wait", "id": "w", "entry": True, "weekday": 2})
    assert ("w", "hours") in {(p.node_id, p.code) for p in no_hour}
    assert check({"kind": "wait", "id": "w", "entry": True, "weekday": 2, "hour": 9}) == []


def test_fn26_the_next_issues_actions_validate_their_fields() -> None:
    problems = check(
        {"kind": "http_request", "id": "h", "entry": True, "url": "ftp://x", "next": "p"},
        {"kind": "create_payment", "id": "p", "amount_minor": 0, "currency": "euro", "next": "b"},
        {"kind": "book_slot", "id": "b", "next": "g"},
        {"kind": "ai_generate", "id": "g", "prompt": "", "variable": ""},
    )
    assert {p.node_id for p in problems} == {"h", "p", "b", "g"}
    ok = check(
        {
            "kind": "http_request",
            "id": "h",
            "entry": True,
            "url": "https://x.test/hook",
            "next": "p",
        },
        {"kind": "create_payment", "id": "p", "amount_minor": 1999, "currency": "EUR", "next": "b"},
        {"kind": "book_slot", "id": "b", "resource": "room-1", "next": "g"},
        {"kind": "ai_generate", "id": "g", "prompt": "Say hi", "variable": "hello"},
    )
    assert ok == []


def test_all_23_node_kinds_decode() -> None:
    assert len(NODE_KINDS) == 23
    assert len(set(NODE_KINDS)) == 23


def test_unknown_kind_and_unknown_field_are_schema_errors() -> None:
    with pytest.raises(msgspec.ValidationError, match="kind"):
        decode_definition({"nodes": [{"kind": "teleport", "id": "x"}]})
    with pytest.raises(msgspec.ValidationError, match="colour"):
        decode_definition({"nodes": [{"kind": "send_email", "id": "x", "colour": "red"}]})


def test_channel_fields_the_workspace_cannot_provide_refuse_publishing() -> None:
    """A push or letter node reads custom fields (the push provider's token field, the
    ``address_*`` fields): a workspace without text field definitions for them cannot publish
    the funnel. E-mail and SMS read the contact's own columns and always pass."""
    graph = {
        "nodes": [
            {"kind": "send_sms", "id": "s", "entry": True, "text": "hi", "next": "p"},
            {"kind": "send_push", "id": "p", "title": "t", "body": "b", "next": "l"},
            {"kind": "send_letter", "id": "l", "body": "Dear…"},
        ]
    }
    definition = decode_definition(graph)
    assert validate(definition, KNOWN) == []
    bare = KnownNames(fields={"address_line1": "text", "address_city": "number"})
    found = {p.node_id: p for p in validate(definition, bare) if p.code == "channel_field"}
    assert set(found) == {"p", "l"}
    assert found["p"].rule == "FN-26"
    assert "'push_token'" in found["p"].message
    assert "'address_city', 'address_postal_code', 'address_country'" in found["l"].message
    # The push provider may read the token from another field: that one must exist.
    other = KnownNames(fields=dict(KNOWN.fields), push_token_field="device")
    [problem] = validate(definition, other)
    assert (problem.node_id, problem.code) == ("p", "channel_field")
    assert "'device'" in problem.message


def test_failure_branches_are_edges() -> None:
    """``on_failure`` of an effect node must point at a node, and what it leads to is reachable."""
    assert (
        check(
            mail("a", entry=True, on_failure="fallback"),
            {"kind": "send_sms", "id": "fallback", "text": "hi"},
        )
        == []
    )
    [problem] = check(mail("a", entry=True, on_failure="nowhere"))
    assert (problem.code, problem.node_id) == ("edge", "a")
    assert "on_failure" in problem.message
