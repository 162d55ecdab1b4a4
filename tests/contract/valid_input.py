"""Valid input for the contract run (:mod:`tests.contract.client_calls`): the request bodies, the
path values that are not ids and the required query values, drawn from what the run has seen
(the demo workspace's objects, listed first, and the ones the run created)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from app.clock import SystemClock

API = "/api/v1"


@dataclass
class Known:
    """What the run has learnt from the answers so far."""

    listed: dict[str, Any] = field(default_factory=dict)
    """Collection path -> the id of its first listed item."""
    created: dict[str, Any] = field(default_factory=dict)
    """Collection path -> the id of the last item the run created there."""
    by_name: dict[str, Any] = field(default_factory=dict)
    """Path parameter name (``run_id``) -> an id seen in a collection of that name."""
    answers: dict[str, Any] = field(default_factory=dict)
    """Path -> the last decoded 2xx answer of a GET."""

    def remember(self, method: str, path: str, data: Any) -> None:
        if method == "get":
            self.answers[path] = data
            first = _first_id(data)
            if first is not None:
                self.listed.setdefault(path, first)
                self.by_name.setdefault(_param_name(path), first)
        elif method == "post" and isinstance(data, dict):
            created = data.get("id")
            if created is None:
                nested = [v for v in data.values() if isinstance(v, dict) and "id" in v]
                created = nested[0]["id"] if len(nested) == 1 else None
            if created is not None:
                self.created[path] = created

    def answer(self, path: str) -> Any:
        return self.answers.get(API + path)

    def listed_id(self, path: str) -> Any:
        return self.listed.get(API + path) or self.created.get(API + path)


def _first_id(data: Any) -> Any:
    items = data.get("items") if isinstance(data, dict) else data
    if isinstance(items, list) and items and isinstance(items[0], dict):
        return items[0].get("id")
    return None


def _param_name(path: str) -> str:
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return (last[:-1] if last.endswith("s") else last) + "_id"


def _items(data: Any) -> list[Any]:
    items = data.get("items") if isinstance(data, dict) else data
    return items if isinstance(items, list) else []


def _first(known: Known, path: str, key: str) -> Any:
    items = _items(known.answer(path))
    return items[0].get(key) if items and isinstance(items[0], dict) else None


def _template_key(known: Known) -> Any:
    return _first(known, "/adrules/templates", "key")


def _provider_kind(known: Known) -> Any:
    return _first(known, "/funnels/providers", "kind") or "email"


def _provider_body(known: Known) -> dict[str, Any]:
    items = _items(known.answer("/funnels/providers"))
    if items:
        return {"shape": items[0]["shape"], "base_url": items[0]["base_url"]}
    return {"shape": "smtp"}


def _account(known: Known) -> Any:
    return known.listed_id("/adrules/accounts")


def _schedule_keyword(known: Known) -> str:
    schedule = known.listed_id("/ranktracking/schedules")
    results = known.answer(f"/ranktracking/schedules/{schedule}/results")
    for row in _items(results):
        if isinstance(row, dict) and row.get("keyword"):
            return str(row["keyword"])
    return "running shoes"


def _rank_run(known: Known) -> Any:
    schedule = known.listed_id("/ranktracking/schedules")
    log = known.answer(f"/ranktracking/schedules/{schedule}/log")
    for group in _items(log):
        for run in group.get("runs", []):
            return run["id"]
    return None


_HAS_TAG = {"kind": "has_tag", "tag": "contract"}
_GEOGRID = {
    "keyword": "contract bakery",
    "business_name": "Contract Bakery",
    "latitude": 48.8566,
    "longitude": 2.3522,
    "size": 3,
}
_TASK = {
    "conditions": [{"type": "metric_value", "metric": "spend", "operator": "gt", "value": "100"}],
    "action": {"type": "log_only"},
}


def _past_week(known: Known, *, rule: bool = False) -> dict[str, Any]:
    """A backtest's range: the seven days before today (the server's clock is the system's)."""
    today = SystemClock().now().date()
    body: dict[str, Any] = {
        "since": (today - timedelta(days=7)).isoformat(),
        "until": (today - timedelta(days=1)).isoformat(),
    }
    if rule:
        body["account_ids"] = [a] if (a := _account(known)) else []
        body["rule"] = {"name": "contract backtest", "tasks": [_TASK]}
    return body


PATH_VALUES: dict[str, Callable[[Known, str], Any]] = {
    "key": lambda k, _: _template_key(k),
    "kind": lambda k, _: _provider_kind(k),
    "name": lambda _, __: "CONTRACT_SECRET",
    "number": lambda _, __: 1,
    "run_id": lambda k, path: _rank_run(k) if "/ranktracking/" in path else None,
    # The queue's job ids are strings, not the bulk jobs' numbers.
    "job_id": lambda k, path: _first(k, "/queue/jobs", "id") if "/queue/jobs/" in path else None,
    # Replacing a rule replaces its tasks (new ids): the run replaces the rule it created.
    "rule_id": lambda k, path: (
        k.created.get(f"{API}/adrules/rules") if path.endswith("/adrules/rules/{rule_id}") else None
    ),
    # A schedule that follows a keyword list takes no keywords of its own: the run's own one.
    "schedule_id": lambda k, path: (
        k.created.get(f"{API}/ranktracking/schedules") if path.endswith("/keywords") else None
    ),
}
"""Path parameters that are not an id listed at the collection above them."""

QUERY_VALUES: dict[str, Callable[[Known], Any]] = {
    "keyword": _schedule_keyword,
    # Two versions of a funnel compared: the first with itself when it has no other.
    "a": lambda _: 1,
    "b": lambda _: 1,
}

Body = Callable[[Known], dict[str, Any]]

BODIES: dict[tuple[str, str], Body] = {
    ("patch", f"{API}/workspace"): lambda _: {"name": "Demo workspace"},
    ("post", f"{API}/api-keys"): lambda _: {"name": "contract", "scope": "read"},
    ("put", f"{API}/secrets/{{name}}"): lambda _: {"value": "a secret value"},
    ("post", f"{API}/members"): lambda _: {
        "email": "member@contract.example",
        "role": "member",
        "password": "a long enough password",
    },
    ("patch", f"{API}/members/{{user_id}}"): lambda _: {"role": "member"},
    ("post", f"{API}/queue/jobs/{{job_id}}/requeue"): lambda _: {},
    ("put", f"{API}/adrules/meta-token"): lambda _: {"token": "EAAB-contract-token"},
    ("post", f"{API}/adrules/rules"): lambda k: {
        "name": "contract rule",
        "account_ids": [a] if (a := _account(k)) else [],
        "tasks": [_TASK],
    },
    ("put", f"{API}/adrules/rules/{{rule_id}}"): lambda k: {
        "name": "contract rule",
        "account_ids": [a] if (a := _account(k)) else [],
        "tasks": [_TASK],
    },
    ("post", f"{API}/adrules/rules/{{rule_id}}/status"): lambda _: {"status": "shadow"},
    ("post", f"{API}/adrules/rules/{{rule_id}}/tasks"): lambda _: _TASK,
    ("put", f"{API}/adrules/rules/{{rule_id}}/tasks/{{task_id}}"): lambda _: _TASK,
    ("post", f"{API}/adrules/rules/{{rule_id}}/preview"): lambda k: {"account_id": _account(k)},
    ("post", f"{API}/adrules/rules/{{rule_id}}/backtest"): _past_week,
    ("post", f"{API}/adrules/backtest"): lambda k: _past_week(k, rule=True),
    ("post", f"{API}/adrules/templates/{{key}}/rules"): lambda k: {
        "name": "contract from template",
        "account_ids": [a] if (a := _account(k)) else [],
    },
    ("post", f"{API}/adrules/stop"): lambda _: {"scope": "workspace", "stopped": False},
    ("post", f"{API}/adrules/batches/{{batch_record_id}}/approve"): lambda _: {},
    ("post", f"{API}/adrules/batches/{{batch_record_id}}/reject"): lambda _: {},
    ("post", f"{API}/funnels/{{funnel_id}}/experiments/{{node_id}}/winner"): lambda _: {
        "branch": "a"
    },
    ("post", f"{API}/ranktracking/schedules/{{schedule_id}}/annotations"): lambda _: {
        "at": "2026-01-01T00:00:00Z",
        "text": "contract note",
    },
    ("put", f"{API}/funnels/frequency-cap"): lambda _: {"per_day": 5, "per_week": 20},
    ("post", f"{API}/funnels/contacts"): lambda _: {
        "email": "contact@contract.example",
        "first_name": "Con",
    },
    ("patch", f"{API}/funnels/contacts/{{contact_id}}"): lambda _: {"last_name": "Tract"},
    ("post", f"{API}/funnels/contacts/import"): lambda _: {
        "csv": "email,first_name\nimported@contract.example,Imp\n"
    },
    ("post", f"{API}/funnels/fields"): lambda _: {"key": "contract_field", "type": "text"},
    ("post", f"{API}/funnels/tags"): lambda _: {"name": "contract"},
    ("post", f"{API}/funnels/lists"): lambda _: {"name": "contract"},
    ("post", f"{API}/funnels/segments/preview"): lambda _: {"predicate": _HAS_TAG},
    ("post", f"{API}/funnels"): lambda _: {"name": "contract funnel"},
    ("patch", f"{API}/funnels/{{funnel_id}}"): lambda _: {"active": True},
    ("post", f"{API}/funnels/{{funnel_id}}/test-send"): lambda k: {
        "node_id": _first_node(k),
        "to": "trial@contract.example",
    },
    ("post", f"{API}/funnels/{{funnel_id}}/enroll"): lambda k: {
        "contact_ids": [c] if (c := k.listed_id("/funnels/contacts")) else []
    },
    ("post", f"{API}/funnels/{{funnel_id}}/simulation"): lambda k: {
        "contact_id": k.listed_id("/funnels/contacts")
    },
    ("post", f"{API}/funnels/{{funnel_id}}/segment-entries"): lambda _: {"segment": _HAS_TAG},
    ("post", f"{API}/ranktracking/lists"): lambda _: {
        "name": "contract list",
        "keywords": ["contract keyword"],
    },
    ("patch", f"{API}/ranktracking/lists/{{list_id}}"): lambda _: {"name": "contract list 2"},
    ("post", f"{API}/ranktracking/lists/{{list_id}}/keywords"): lambda _: {
        "keywords": ["contract keyword two"]
    },
    ("post", f"{API}/ranktracking/lists/{{list_id}}/keywords/remove"): lambda _: {
        "keywords": ["contract keyword two"]
    },
    ("post", f"{API}/ranktracking/lists/{{list_id}}/import"): lambda _: {
        "text": "contract keyword three\n"
    },
    ("post", f"{API}/ranktracking/lists/{{list_id}}/import-jobs"): lambda _: {
        "text": "contract keyword four\n"
    },
    ("post", f"{API}/ranktracking/schedules"): lambda _: {
        "name": "contract schedule",
        "keywords": ["contract keyword"],
        "domain": "contract.example",
        "depth": "top10",
        "devices": ["desktop"],
        "location_code": 2840,
        "language_code": "en",
    },
    ("post", f"{API}/ranktracking/geogrids"): lambda _: _GEOGRID,
    ("post", f"{API}/ranktracking/geogrids/estimate"): lambda _: _GEOGRID,
    ("post", f"{API}/ranktracking/estimate"): lambda _: {
        "name": "contract estimate",
        "keywords": ["contract keyword"],
        "domain": "contract.example",
        "depth": "top10",
        "devices": ["desktop"],
        "location_code": 2840,
        "language_code": "en",
    },
    ("patch", f"{API}/ranktracking/schedules/{{schedule_id}}"): lambda _: {
        "name": "contract schedule 2"
    },
    ("put", f"{API}/ranktracking/schedules/{{schedule_id}}/keywords"): lambda k: {
        "keywords": [_schedule_keyword(k)]
    },
    ("post", f"{API}/ranktracking/schedules/{{schedule_id}}/run"): lambda _: {},
    ("post", f"{API}/ranktracking/balance/top-ups"): lambda _: {"amount_eur": "10.00"},
    ("put", f"{API}/ranktracking/schedules/{{schedule_id}}/targets"): lambda k: {
        "targets": {_schedule_keyword(k): "https://sweepline-demo.com/contract"}
    },
    ("put", f"{API}/ranktracking/schedules/{{schedule_id}}/competitors"): lambda _: {
        "domains": ["competitor.example"]
    },
    ("post", f"{API}/ranktracking/schedules/{{schedule_id}}/alerts"): lambda _: {
        "name": "contract alert",
        "kind": "enters_top",
        "threshold": 10,
        "recipients": ["alerts@contract.example"],
    },
    ("put", f"{API}/ranktracking/schedules/{{schedule_id}}/alerts/{{rule_id}}"): lambda _: {
        "name": "contract alert",
        "kind": "leaves_top",
        "threshold": 10,
        "recipients": ["alerts@contract.example"],
    },
    ("post", f"{API}/ranktracking/schedules/{{schedule_id}}/share-links"): lambda _: {"days": 7},
    ("post", f"{API}/ranktracking/schedules/{{schedule_id}}/search-console/preview"): lambda _: {
        "site_url": "sc-domain:sweepline-demo.com",
        "start_date": "2026-01-01",
        "end_date": "2026-01-28",
    },
    ("post", f"{API}/ranktracking/schedules/{{schedule_id}}/search-console/keywords"): lambda _: {
        "keywords": ["contract query"],
        "tag": "contract",
    },
    ("post", f"{API}/ranktracking/schedules/{{schedule_id}}/tags"): lambda k: {
        "tag": "contract",
        "keywords": [_schedule_keyword(k)],
    },
    ("post", f"{API}/ranktracking/schedules/{{schedule_id}}/tags/remove"): lambda k: {
        "tag": "contract",
        "keywords": [_schedule_keyword(k)],
    },
    ("put", f"{API}/ranktracking/schedules/{{schedule_id}}/report"): lambda _: {
        "period": "weekly",
        "recipients": ["reports@contract.example"],
    },
    ("post", f"{API}/funnels/forms"): lambda _: {
        "name": "contract form",
        "fields": [{"key": "company", "label": "Company"}],
    },
    ("post", f"{API}/funnels/campaigns"): lambda _: {
        "name": "contract campaign",
        "subject": "Hello",
        "body": "Hello {{ first_name }}",
        "audience": _HAS_TAG,
    },
    ("patch", f"{API}/funnels/campaigns/{{campaign_id}}"): lambda _: {
        "name": "contract campaign",
        "subject": "Hello again",
        "body": "Hello",
        "audience": _HAS_TAG,
    },
    ("post", f"{API}/funnels/campaigns/{{campaign_id}}/schedule"): lambda _: {},
    ("post", f"{API}/funnels/campaigns/{{campaign_id}}/test-send"): lambda _: {
        "to": ["test@contract.example"]
    },
    ("post", f"{API}/funnels/saved-segments"): lambda _: {
        "name": "contract segment",
        "description": "made by the contract run",
        "predicate": _HAS_TAG,
    },
    ("patch", f"{API}/funnels/saved-segments/{{segment_id}}"): lambda _: {
        "name": "contract segment, renamed"
    },
    ("put", f"{API}/funnels/providers/{{kind}}"): _provider_body,
    ("put", f"{API}/funnels/ai/quota"): lambda _: {"quota_tokens": 100000},
    ("post", f"{API}/funnels/ai-drafts"): lambda _: {
        "description": "Welcome new contacts, then send tips two days later.",
        "trigger": {"kind": "manual"},
    },
    ("post", f"{API}/funnels/sources"): lambda _: {
        "name": "contract source",
        "provider": "stripe",
        "secret": "whsec_contract_signing_secret",
    },
    ("post", f"{API}/funnels/sources/{{source_id}}/rotate"): lambda _: {
        "secret": "whsec_contract_signing_secret_2"
    },
}
"""Request bodies by (method, path template); a body not listed is ``{}``."""


def _first_node(known: Known) -> str:
    funnel = known.listed_id("/funnels")
    detail = known.answer(f"/funnels/{funnel}")
    definition = detail.get("draft") if isinstance(detail, dict) else None
    nodes = definition.get("nodes") if isinstance(definition, dict) else None
    if isinstance(nodes, list):
        for node in nodes:
            if isinstance(node, dict) and node.get("kind") == "send_email":
                return str(node.get("id"))
        if nodes and isinstance(nodes[0], dict):
            return str(nodes[0].get("id"))
    return "start"
