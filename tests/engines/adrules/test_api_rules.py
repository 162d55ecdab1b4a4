"""The rules API (AR-1): the full catalogues accepted, every validation rule answered 422 with the
field named and nothing written, status changes, tasks, and tenancy (404 across workspaces)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from app.engines.adrules.catalogue import (
    ACTIONS,
    COOLDOWNS,
    INSIGHTS_METRICS,
    OPERATORS,
    OTHER_METRICS,
    PERIODS,
)
from app.integrations.http_guard import GUARD_RESOURCE, AddressGuard
from app.runtime import Runtime
from tests.engines.adrules.factories import Workspace, create_account, rule_body

pytestmark = pytest.mark.usefixtures("world")

ACTION_EXAMPLES: dict[str, dict[str, Any]] = {
    "pause_campaign": {},
    "activate_campaign": {},
    "increase_budget": {"by": "percent", "amount": "20", "max": "500"},
    "decrease_budget": {"by": "amount", "amount": "5", "min": "10"},
    "set_budget": {"amount": "25"},
    "rename": {"template": "{name} [{rule} {date}]"},
    "append_to_name": {"text": "LOSER", "separator": " | "},
    "remove_from_name": {"text": "LOSER", "separator": " | "},
    "notify_email": {"recipients": ["ops@example.com"], "subject": "{rule}: {name}"},
    "notify_webhook": {"url": "https://hooks.example.com/ads", "secret": "0123456789abcdef"},
    "log_only": {},
}


async def _account(
    runtime: Runtime, ws: Workspace, meta_id: str = "act_1", timezone_name: str = "UTC"
) -> int:
    account = await create_account(
        runtime, workspace_id=ws.workspace_id, meta_id=meta_id, timezone_name=timezone_name
    )
    return account.id


def _full_catalogue_tasks() -> list[dict[str, Any]]:
    metrics = [m for m in (*INSIGHTS_METRICS, *OTHER_METRICS) if m != "custom_metric"]
    tasks: list[dict[str, Any]] = []
    for i, action in enumerate(ACTIONS):
        chunk = metrics[i * 4 : i * 4 + 4] or metrics[:1]
        conditions: list[dict[str, Any]] = [
            {
                "type": "metric_value",
                "metric": metric,
                "period": PERIODS[(i * 4 + j) % len(PERIODS)],
                "operator": OPERATORS[(i * 4 + j) % len(OPERATORS)],
                "value": "1.5",
            }
            for j, metric in enumerate(chunk)
        ]
        tasks.append(
            {
                "name": f"task {action}",
                "conditions": conditions,
                "group": "or" if i % 2 else "and",
                "action": {"type": action, **ACTION_EXAMPLES[action]},
                "cooldown": COOLDOWNS[i % len(COOLDOWNS)],
            }
        )
    tasks[0]["conditions"].append(
        {
            "type": "metric_metric",
            "metric": "spend",
            "period": "today",
            "operator": "gt",
            "other_metric": "spend",
            "other_period": "yesterday",
            "multiplier": "1.5",
        }
    )
    tasks[1]["conditions"].append({"type": "clock", "hours": [22, 23], "weekdays": ["fri", "sat"]})
    tasks[2]["conditions"].append(
        {
            "type": "custom_metric",
            "spreadsheet_id": "1AbCdEfGhIjKlMnOp",
            "sheet_name": "Targets",
            "lookup_column": "A",
            "value_column": "C",
            "operator": "gte",
            "value": "2",
        }
    )
    return tasks


async def test_ar1_the_full_catalogues_are_accepted(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace
) -> None:
    assert (len(INSIGHTS_METRICS) + len(OTHER_METRICS), len(PERIODS), len(OPERATORS)) == (45, 11, 6)
    assert (len(ACTIONS), len(COOLDOWNS)) == (11, 11)
    body = rule_body(account_ids=[await _account(runtime, ws)], tasks=_full_catalogue_tasks())
    response = await client.post("/api/v1/adrules/rules", json=body, headers=ws.headers)
    assert response.status_code == 201, response.text
    rule = response.json()
    assert [t["action"]["type"] for t in rule["tasks"]] == list(ACTIONS)
    used = {c.get("metric") for t in rule["tasks"] for c in t["conditions"]}
    used |= (
        {"custom_metric"}
        if any(c["type"] == "custom_metric" for t in rule["tasks"] for c in t["conditions"])
        else set()
    )
    assert used - {None} == {*INSIGHTS_METRICS, *OTHER_METRICS}
    assert rule["tasks"][2]["action"] == {
        "type": "increase_budget",
        **ACTION_EXAMPLES["increase_budget"],
    }
    # Read back exactly as written.
    again = await client.get(f"/api/v1/adrules/rules/{rule['id']}", headers=ws.headers)
    assert again.json() == rule


def _task(**overrides: Any) -> dict[str, Any]:
    task: dict[str, Any] = {
        "conditions": [{"type": "metric_value", "metric": "spend", "operator": "gt", "value": "1"}],
        "action": {"type": "log_only"},
    }
    task.update(overrides)
    return task


def _condition(**overrides: Any) -> dict[str, Any]:
    return {"type": "metric_value", "metric": "spend", "operator": "gt", "value": "1", **overrides}


INVALID: list[tuple[str, dict[str, Any], str]] = [
    (
        "unknown metric",
        {"tasks": [_task(conditions=[_condition(metric="spendz")])]},
        "tasks[0].conditions[0].metric",
    ),
    (
        "unknown operator",
        {"tasks": [_task(conditions=[_condition(operator="gtx")])]},
        "tasks[0].conditions[0].operator",
    ),
    (
        "unknown period",
        {"tasks": [_task(conditions=[_condition(period="last_2d")])]},
        "tasks[0].conditions[0].period",
    ),
    (
        "unknown other period",
        {
            "tasks": [
                _task(
                    conditions=[
                        {
                            "type": "metric_metric",
                            "metric": "cpc",
                            "operator": "gt",
                            "other_metric": "cpc",
                            "other_period": "forever",
                        }
                    ]
                )
            ]
        },
        "tasks[0].conditions[0].other_period",
    ),
    (
        "unknown action",
        {"tasks": [_task(action={"type": "delete_campaign"})]},
        "tasks[0].action.type",
    ),
    ("unknown cooldown", {"tasks": [_task(cooldown="5m")]}, "tasks[0].cooldown"),
    (
        "increase without a maximum",
        {"tasks": [_task(action={"type": "increase_budget", "amount": "10"})]},
        "tasks[0].action.max",
    ),
    (
        "decrease without a minimum",
        {"tasks": [_task(action={"type": "decrease_budget", "amount": "10"})]},
        "tasks[0].action.min",
    ),
    (
        "zero budget amount",
        {"tasks": [_task(action={"type": "set_budget", "amount": "0"})]},
        "tasks[0].action.amount",
    ),
    ("empty timetable", {"schedule": {"mode": "timetable", "week": {}}}, "schedule.week"),
    (
        "bad time of day",
        {"schedule": {"mode": "timetable", "week": {"mon": ["24:00"]}}},
        "schedule.week.mon[0]",
    ),
    (
        "end before start",
        {"schedule": {"mode": "interval", "start_date": "2026-03-10", "end_date": "2026-03-09"}},
        "schedule.end_date",
    ),
    ("no task", {"tasks": []}, "tasks"),
    ("task without conditions", {"tasks": [_task(conditions=[])]}, "tasks[0].conditions"),
    (
        "custom metric as a plain metric",
        {"tasks": [_task(conditions=[_condition(metric="custom_metric")])]},
        "tasks[0].conditions[0].metric",
    ),
    (
        "clock hour out of range",
        {"tasks": [_task(conditions=[{"type": "clock", "hours": [24]}])]},
        "tasks[0].conditions[0].hours[0]",
    ),
    (
        "unknown status filter",
        {"prefilters": {"effective_status": {"operator": "in", "values": ["RUNNING"]}}},
        "prefilters.effective_status.values[0]",
    ),
    ("unknown rule status", {"status": "enabled"}, "status"),
    ("blank name", {"name": ""}, "name"),
]


async def test_ar1_invalid_rules_are_refused_with_the_field_named(
    client: httpx.AsyncClient, ws: Workspace
) -> None:
    """Each case in one test: the cases share a workspace, so the suite stays fast."""
    for case, change, field in INVALID:
        body = rule_body(**{"status": "draft", **change})
        response = await client.post("/api/v1/adrules/rules", json=body, headers=ws.headers)
        assert response.status_code == 422, (case, response.text)
        error = response.json()
        assert error["code"] == "validation_failed", case
        assert field in [d["field"] for d in error["details"]], (case, error)
    listed = await client.get("/api/v1/adrules/rules", headers=ws.headers)
    assert listed.json()["items"] == []


async def test_ar1_every_problem_is_reported_at_once(
    client: httpx.AsyncClient, ws: Workspace
) -> None:
    body = rule_body(
        status="draft",
        schedule={
            "mode": "timetable",
            "week": {},
            "start_date": "2026-03-10",
            "end_date": "2026-03-01",
        },
        tasks=[
            _task(action={"type": "increase_budget", "amount": "10"}),
            _task(action={"type": "decrease_budget", "amount": "10"}),
        ],
    )
    response = await client.post("/api/v1/adrules/rules", json=body, headers=ws.headers)
    assert response.status_code == 422
    fields = {d["field"] for d in response.json()["details"]}
    assert fields == {
        "tasks[0].action.max",
        "tasks[1].action.min",
        "schedule.week",
        "schedule.end_date",
    }


async def test_ar1_malformed_json_is_a_400(client: httpx.AsyncClient, ws: Workspace) -> None:
    response = await client.post(
        "/api/v1/adrules/rules",
        content=b"{not json",
        headers={**ws.headers, "content-type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_body"


async def test_ar1_an_active_rule_needs_an_ad_account(
    client: httpx.AsyncClient, ws: Workspace
) -> None:
    response = await client.post(
        "/api/v1/adrules/rules", json=rule_body(status="active"), headers=ws.headers
    )
    assert response.status_code == 422
    assert response.json()["details"][0]["field"] == "account_ids"


async def test_ar5_next_execution_is_stored_and_recomputed_when_the_schedule_changes(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace
) -> None:
    account_id = await _account(runtime, ws)
    now = runtime.clock.now()
    created = (
        await client.post(
            "/api/v1/adrules/rules",
            json=rule_body(status="draft", account_ids=[account_id]),
            headers=ws.headers,
        )
    ).json()
    assert created["status"] == "draft"
    assert created["next_execution_at"] is None
    base = f"/api/v1/adrules/rules/{created['id']}"

    active = (
        await client.post(f"{base}/status", json={"status": "active"}, headers=ws.headers)
    ).json()
    assert active["next_execution_at"] == now.isoformat().replace("+00:00", "Z")

    runtime.clock.advance(minutes=5)  # type: ignore[attr-defined]
    body = rule_body(
        status="active",
        account_ids=[account_id],
        schedule={"mode": "timetable", "week": {"tue": ["07:30"]}},
        tasks=[{**t, "id": t["id"]} for t in active["tasks"]],
    )
    replaced = (await client.put(base, json=body, headers=ws.headers)).json()
    assert replaced["next_execution_at"] == "2026-03-03T07:30:00Z"
    assert [t["id"] for t in replaced["tasks"]] == [t["id"] for t in active["tasks"]]

    # Same schedule again: the stored next run is kept, not re-derived.
    renamed = (await client.put(base, json={**body, "name": "Renamed"}, headers=ws.headers)).json()
    assert renamed["next_execution_at"] == "2026-03-03T07:30:00Z"

    paused = (
        await client.post(f"{base}/status", json={"status": "paused"}, headers=ws.headers)
    ).json()
    assert paused["next_execution_at"] is None
    archived = await client.delete(base, headers=ws.headers)
    assert archived.json()["status"] == "archived"
    listed = await client.get("/api/v1/adrules/rules?status=archived", headers=ws.headers)
    assert [r["id"] for r in listed.json()["items"]] == [created["id"]]


async def test_ar23a_the_ad_accounts_zone_drives_the_timetable_else_the_workspace(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    from tests.engines.adrules.factories import create_workspace

    tokyo = await create_workspace(runtime, name="Tokyo", timezone="Asia/Tokyo")
    # The account reports in Jakarta time (UTC+7): the rule's clock is the account's.
    jakarta = await _account(runtime, tokyo, "act_1", "Asia/Jakarta")
    body = rule_body(
        account_ids=[jakarta], schedule={"mode": "timetable", "week": {"tue": ["09:00"]}}
    )
    rule = (await client.post("/api/v1/adrules/rules", json=body, headers=tokyo.headers)).json()
    assert rule["next_execution_at"] == "2026-03-03T02:00:00Z"
    assert rule["schedule"]["timezone"] == "Asia/Jakarta"

    # Accounts in different zones and no zone named: the workspace's zone (Tokyo, UTC+9).
    berlin = await _account(runtime, tokyo, "act_2", "Europe/Berlin")
    mixed = (
        await client.post(
            "/api/v1/adrules/rules",
            json={**body, "account_ids": [jakarta, berlin]},
            headers=tokyo.headers,
        )
    ).json()
    assert mixed["next_execution_at"] == "2026-03-03T00:00:00Z"
    assert mixed["schedule"]["timezone"] is None

    # A zone named by the rule wins over the accounts'.
    named = (
        await client.post(
            "/api/v1/adrules/rules",
            json={**body, "schedule": {**body["schedule"], "timezone": "UTC"}},
            headers=tokyo.headers,
        )
    ).json()
    assert named["next_execution_at"] == "2026-03-03T09:00:00Z"
    unknown = await client.post(
        "/api/v1/adrules/rules",
        json={**body, "schedule": {**body["schedule"], "timezone": "Mars/Olympus"}},
        headers=tokyo.headers,
    )
    assert unknown.status_code == 422
    assert "schedule.timezone" in unknown.text


async def test_ar1_tasks_can_be_added_replaced_and_removed(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace
) -> None:
    rule = (
        await client.post(
            "/api/v1/adrules/rules", json=rule_body(status="draft"), headers=ws.headers
        )
    ).json()
    base = f"/api/v1/adrules/rules/{rule['id']}/tasks"
    added = await client.post(
        base, json=_task(action={"type": "pause_campaign"}, cooldown="24h"), headers=ws.headers
    )
    assert added.status_code == 201
    task_id = added.json()["id"]
    bad = await client.put(
        f"{base}/{task_id}",
        json=_task(action={"type": "increase_budget", "amount": "5"}),
        headers=ws.headers,
    )
    assert bad.status_code == 422
    assert bad.json()["details"][0]["field"] == "task.action.max"
    replaced = await client.put(
        f"{base}/{task_id}", json=_task(cooldown="lifetime"), headers=ws.headers
    )
    assert replaced.json()["cooldown"] == "lifetime"
    assert len((await client.get(base, headers=ws.headers)).json()) == 2
    assert (await client.delete(f"{base}/{task_id}", headers=ws.headers)).status_code == 204
    remaining = (await client.get(base, headers=ws.headers)).json()
    assert len(remaining) == 1
    last = await client.delete(f"{base}/{remaining[0]['id']}", headers=ws.headers)
    assert last.status_code == 422
    assert last.json()["details"][0]["field"] == "tasks"


async def test_ar1_rules_list_pages(client: httpx.AsyncClient, ws: Workspace) -> None:
    for i in range(5):
        await client.post(
            "/api/v1/adrules/rules",
            json=rule_body(status="draft", name=f"R{i}"),
            headers=ws.headers,
        )
    first = (await client.get("/api/v1/adrules/rules?limit=3", headers=ws.headers)).json()
    assert [r["name"] for r in first["items"]] == ["R4", "R3", "R2"]
    second = (
        await client.get(
            f"/api/v1/adrules/rules?limit=3&cursor={first['next_cursor']}", headers=ws.headers
        )
    ).json()
    assert [r["name"] for r in second["items"]] == ["R1", "R0"]
    assert second["next_cursor"] is None
    bad = await client.get("/api/v1/adrules/rules?cursor=abc", headers=ws.headers)
    assert bad.status_code == 422


async def test_tenancy_another_workspaces_rule_answers_404(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, other_ws: Workspace
) -> None:
    theirs = (
        await client.post(
            "/api/v1/adrules/rules", json=rule_body(status="draft"), headers=other_ws.headers
        )
    ).json()
    task_id = theirs["tasks"][0]["id"]
    base = f"/api/v1/adrules/rules/{theirs['id']}"
    calls = [
        client.get(base, headers=ws.headers),
        client.put(base, json=rule_body(status="draft"), headers=ws.headers),
        client.post(f"{base}/status", json={"status": "paused"}, headers=ws.headers),
        client.delete(base, headers=ws.headers),
        client.get(f"{base}/tasks", headers=ws.headers),
        client.post(f"{base}/tasks", json=_task(), headers=ws.headers),
        client.put(f"{base}/tasks/{task_id}", json=_task(), headers=ws.headers),
        client.delete(f"{base}/tasks/{task_id}", headers=ws.headers),
        client.get(f"/api/v1/adrules/batches?rule_id={theirs['id']}", headers=ws.headers),
    ]
    for call in calls:
        response = await call
        assert response.status_code == 404, response.request.url
        assert response.json()["code"] == "rule_not_found"
    assert (await client.get("/api/v1/adrules/rules", headers=ws.headers)).json()["items"] == []
    # Their rule is untouched.
    mine_again = await client.get(base, headers=other_ws.headers)
    assert mine_again.json() == theirs


async def test_tenancy_another_workspaces_account_cannot_be_targeted(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, other_ws: Workspace
) -> None:
    theirs = await _account(runtime, other_ws, "act_9")
    response = await client.post(
        "/api/v1/adrules/rules", json=rule_body(account_ids=[theirs]), headers=ws.headers
    )
    assert response.status_code == 422
    assert response.json()["details"][0]["field"] == "account_ids[0]"


async def test_unauthenticated_calls_are_refused(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/v1/adrules/rules")
    assert response.status_code == 401


async def test_batch_log_lists_records_newest_first(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace
) -> None:
    from app.engines.adrules.models import Batch

    account_id = await _account(runtime, ws)
    rule = (
        await client.post(
            "/api/v1/adrules/rules", json=rule_body(account_ids=[account_id]), headers=ws.headers
        )
    ).json()
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        for i, status in enumerate(["skipped", "queued"]):
            uow.session.add(
                Batch(
                    batch_id=f"b{i}",
                    workspace_id=ws.workspace_id,
                    rule_id=rule["id"],
                    ad_account_id=account_id,
                    account_meta_id="act_1",
                    status=status,
                    entities=i,
                    pages=1,
                    fetch_attempts=3 if status == "skipped" else 1,
                    executed=0,
                    not_executed=0,
                    skipped=0,
                    errors=0,
                    error="boom" if status == "skipped" else None,
                    tick_at=now + timedelta(seconds=i),
                    created_at=now + timedelta(seconds=i),
                )
            )
    log = (
        await client.get(f"/api/v1/adrules/batches?rule_id={rule['id']}", headers=ws.headers)
    ).json()
    assert [(b["batch_id"], b["status"], b["rule_name"]) for b in log["items"]] == [
        ("b1", "queued", "Spend watch"),
        ("b0", "skipped", "Spend watch"),
    ]


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://2852039166/",
        "http://0x7f000001:8080/hook",
        "http://[::ffff:10.0.0.1]/hook",
        "http://localhost:8080/hook",
        "http://192.168.0.10/hook",
    ],
)
async def test_a_webhook_inside_the_network_is_refused_at_configuration(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, url: str
) -> None:
    """SSRF: a notify_webhook URL that points at a private, loopback, link-local or metadata
    address (any encoding) is refused before the rule is stored, naming the field."""
    runtime.resources.put(GUARD_RESOURCE, AddressGuard())
    task = {
        **rule_body()["tasks"][0],
        "action": {"type": "notify_webhook", "url": url, "secret": "0123456789abcdef"},
    }
    response = await client.post(
        "/api/v1/adrules/rules", json=rule_body(status="draft", tasks=[task]), headers=ws.headers
    )
    assert response.status_code == 422, response.text
    assert "tasks[0].action.url" in [d["field"] for d in response.json()["details"]]
    listed = await client.get("/api/v1/adrules/rules", headers=ws.headers)
    assert listed.json()["items"] == []
