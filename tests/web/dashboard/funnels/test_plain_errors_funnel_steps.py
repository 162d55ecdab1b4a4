"""Every setting of every kind of funnel step, given a bad value, is refused with a message that
names the step and the setting's label and says what it allows, never a machine path
(``nodes[3].config.delay_minutes``) or a library's wording (platform spec PL-16; the editor's
check of FN-21 … FN-26). The walk goes through the editor's own check endpoint, so it covers both
sources of a refusal: the definition that does not decode and the validator's findings; saving a
draft that does not decode reads the same way."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from app.engines.funnels.definitions import service
from app.engines.funnels.definitions.graph import NODE_KINDS
from app.runtime import Runtime
from app.web.dashboard.funnel_editor_forms import FORMS
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, sign_in

FORBIDDEN = ("[", ".config.", "Expected `", "msgspec", "$.", "`")
EMPTY_ALL = {"kind": "all", "predicates": []}
NONSENSE = {"kind": "nonsense"}

# The base settings of each kind a bad value is put into (valid, or refused only elsewhere).
BASES: dict[str, dict[str, Any]] = {
    "send_email": {"subject": "s", "body": "b"},
    "send_sms": {"text": "t"},
    "send_push": {"title": "t", "body": "b"},
    "send_letter": {"body": "b"},
    "notify_team": {"to": ["team@example.com"], "subject": "s", "body": "b"},
    "set_field": {"field": "first_name", "value": "Ann"},
    "http_request": {"url": "https://example.com/hook"},
    "create_payment": {"amount_minor": 100, "currency": "EUR", "description": "d"},
    "book_slot": {"resource": "room"},
    "ai_generate": {"prompt": "p", "variable": "v"},
    "wait": {"days": 1},
    "condition": {"predicate": {"kind": "has_tag", "tag": "vip"}},
    "split": {"branches": [{"name": "a", "weight": 50}, {"name": "b", "weight": 50}]},
    "throttle": {"limit": 10},
}

# (kind, setting, bad value, other settings it needs, the label the editor's form shows)
CASES: list[tuple[str, str, Any, dict[str, Any], str]] = [
    ("send_email", "id", "two words", {}, "Name"),
    ("send_email", "subject", "", {}, "Subject"),
    ("send_email", "body", "", {}, "Body"),
    ("send_email", "html", 5, {}, "HTML body"),
    ("send_email", "best_hour", "yes", {}, "Send at the contact's best hour"),
    ("send_sms", "text", "", {}, "Text"),
    ("send_sms", "best_hour", 2, {}, "Send at the contact's best hour"),
    ("send_push", "title", "", {}, "Title"),
    ("send_push", "body", "", {}, "Body"),
    ("send_push", "best_hour", "x", {}, "Send at the contact's best hour"),
    ("send_letter", "body", "", {}, "Body"),
    ("send_letter", "template", 7, {}, "Template"),
    ("send_letter", "best_hour", "x", {}, "Send at the contact's best hour"),
    ("notify_team", "to", [], {}, "Recipients"),
    ("notify_team", "subject", "", {}, "Subject"),
    ("notify_team", "body", "", {}, "Body"),
    ("add_tag", "tag", "no such tag", {}, "Tag"),
    ("remove_tag", "tag", "", {}, "Tag"),
    ("add_to_list", "list", "no such list", {}, "List"),
    ("remove_from_list", "list", "", {}, "List"),
    ("set_field", "field", "no_such_field", {}, "Field"),
    ("set_field", "value", 5, {}, "Value"),
    ("http_request", "url", "ftp://example.com", {}, "URL"),
    ("http_request", "method", "FETCH", {}, "Method"),
    ("http_request", "headers", "X-Key: 1", {}, "Headers"),
    ("http_request", "body", 5, {}, "Request body"),
    ("create_payment", "amount_minor", 0, {}, "Amount in cents"),
    ("create_payment", "currency", "euro", {}, "Currency"),
    ("create_payment", "description", 5, {}, "Description"),
    ("book_slot", "resource", "", {}, "Resource"),
    ("book_slot", "duration_minutes", 0, {}, "Duration in minutes"),
    ("enter_funnel", "funnel_id", 999_999, {}, "Funnel"),
    ("exit_funnel", "funnel_id", 999_999, {}, "Funnel to leave"),
    ("ai_generate", "prompt", "", {}, "Prompt"),
    ("ai_generate", "variable", "", {}, "Variable it fills"),
    ("wait", "days", -1, {}, "Days"),
    ("wait", "days", "two", {}, "Days"),
    ("wait", "hours", -1, {}, "Hours"),
    ("wait", "minutes", -5, {}, "Minutes"),
    ("wait", "until", "2027-01-31T09:00:00", {"days": 0}, "Or until"),
    ("wait", "until", "next week", {"days": 0}, "Or until"),
    ("wait", "weekday", 9, {"days": 0, "hour": 9}, "Or the next weekday"),
    ("wait", "field", "no_such_date", {"days": 0, "hour": 9}, "Or a date field of the contact"),
    ("wait", "offset_days", "x", {}, "Days after that date"),
    ("wait", "hour", 30, {}, "At hour"),
    ("wait", "minute", 70, {}, "At minute"),
    ("wait", "until_event", 5, {}, "End early on event"),
    ("wait", "event_filter", NONSENSE, {}, "Only when that event's properties match"),
    ("condition", "predicate", EMPTY_ALL, {}, "Contacts who match"),
    ("condition", "predicate", NONSENSE, {}, "Contacts who match"),
    ("split", "branches", [{"name": "a", "weight": 0}], {}, "Branches"),
    ("split", "experiment", {"window_days": 0}, {}, "Experiment"),
    ("goal", "predicate", EMPTY_ALL, {}, "Contacts who match jump here"),
    ("throttle", "limit", 0, {}, "At most"),
    ("throttle", "period_seconds", 0, {}, "Per seconds"),
    ("throttle", "scope", "world", {}, "Counted per"),
    ("throttle", "channel", "fax", {}, "Channel"),
    ("quiet_hours", "start_hour", 25, {}, "Hold from hour"),
    ("quiet_hours", "end_hour", 21, {}, "Until hour"),
]


def test_the_walk_covers_every_setting_of_every_kind_pl16() -> None:
    walked = {(kind, name) for kind, name, *_ in CASES}
    offered = {(kind, name) for kind in NODE_KINDS for name, _, _ in FORMS[kind]}
    assert offered - walked == set()


def assert_plain(message: str, label: str, setting: str) -> None:
    assert re.match(r"^Step '[^']+' — ", message), message
    assert f" — {label}: " in message, (label, message)
    assert len(message.split(f"{label}: ", 1)[1]) > 8, message
    for bad in FORBIDDEN:
        assert bad not in message, message
    if "_" in setting:
        assert setting not in message, message


async def _funnel(runtime: Runtime, tenant: Tenant) -> int:
    async with runtime.db.write() as uow:
        funnel = await service.create_funnel(
            uow.session,
            tenant.workspace_id,
            "F",
            service.parse_definition({"nodes": []}),
            runtime.clock.now(),
        )
    return funnel.id


def graph_with(kind: str, setting: str, value: Any, extra: dict[str, Any]) -> dict[str, Any]:
    node = {"kind": kind, "id": "step_1", "label": "The step", "entry": True, **BASES.get(kind, {})}
    node.update(extra)
    node[setting] = value
    return {"triggers": [{"kind": "manual"}], "nodes": [node]}


@pytest.mark.parametrize(("kind", "setting", "value", "extra", "label"), CASES)
async def test_every_step_setting_says_its_label_and_what_it_allows_pl16(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    kind: str,
    setting: str,
    value: Any,
    extra: dict[str, Any],
    label: str,
) -> None:
    funnel_id = await _funnel(runtime, tenant)
    await sign_in(client, tenant.email, tenant.password)
    token = csrf_from((await client.get(f"/ui/funnels/{funnel_id}")).text)
    answer = await client.post(
        f"/ui/funnels/{funnel_id}/check",
        json={"definition": graph_with(kind, setting, value, extra)},
        headers={"x-csrf-token": token},
    )
    assert answer.status_code == 200, answer.text
    problems = answer.json()["problems"]
    mine = [p for p in problems if p.get("field") == setting]
    assert mine, problems
    for problem in mine:
        assert problem["message"].startswith("Step 'The step' — "), problem["message"]
        assert_plain(problem["message"], label, setting)
    for problem in problems:
        for bad in FORBIDDEN:
            assert bad not in problem["message"], problem["message"]


async def test_the_issue_example_reads_plainly_pl16(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    funnel_id = await _funnel(runtime, tenant)
    await sign_in(client, tenant.email, tenant.password)
    token = csrf_from((await client.get(f"/ui/funnels/{funnel_id}")).text)
    graph = graph_with("wait", "minutes", "ten", {})
    graph["nodes"][0]["label"] = "Wait 2 days"
    answer = await client.post(
        f"/ui/funnels/{funnel_id}/check",
        json={"definition": graph},
        headers={"x-csrf-token": token},
    )
    [problem] = answer.json()["problems"]
    assert problem["message"] == (
        "Step 'Wait 2 days' — Minutes: a whole number of minutes, 0 or more"
    )
    assert (problem["node_id"], problem["field"]) == ("step_1", "minutes")


async def test_saving_a_draft_that_does_not_decode_reads_plainly_pl16(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """The save posts the editor's graph as JSON; a setting the decoder refuses is named by
    the step and the setting's label, and the stored draft is left as it was."""
    import json

    funnel_id = await _funnel(runtime, tenant)
    await sign_in(client, tenant.email, tenant.password)
    token = csrf_from((await client.get(f"/ui/funnels/{funnel_id}")).text)
    graph = graph_with("throttle", "period_seconds", "hourly", {})
    answer = await client.post(
        f"/ui/funnels/{funnel_id}",
        data={"name": "F", "definition": json.dumps(graph), "_csrf_token": token},
    )
    assert answer.status_code == 200, answer.text[:500]
    shown = re.search(r'id="error"[^>]*>(.*?)</', answer.text, re.DOTALL)
    assert shown is not None, answer.text[:3000]
    message = shown.group(1).strip().replace("&#39;", "'")
    assert message == "Step 'The step' — Per seconds: a whole number of seconds, 1 or more"
    broken = await client.post(
        f"/ui/funnels/{funnel_id}",
        data={"name": "F", "definition": "{nodes: []", "_csrf_token": token},
    )
    assert "not valid JSON (line 1, column 2)" in broken.text
