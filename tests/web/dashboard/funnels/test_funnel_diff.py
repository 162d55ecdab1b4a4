"""Comparing two graphs of a funnel: steps added, removed and changed field by field; triggers and
settings beside them."""

from __future__ import annotations

from app.web.dashboard.funnel_diff import diff


def test_steps_added_removed_and_changed() -> None:
    before = {
        "triggers": [{"kind": "manual"}],
        "nodes": [
            {"kind": "wait", "id": "w", "entry": True, "days": 1, "next": "old"},
            {"kind": "goal", "id": "old"},
        ],
    }
    after = {
        "triggers": [{"kind": "api_event", "event": "signup"}],
        "nodes": [
            {"kind": "wait", "id": "w", "entry": True, "days": 3, "next": "new"},
            {"kind": "goal", "id": "new"},
        ],
    }
    changes = diff(before, after)
    by_id = {s.node_id: s for s in changes["steps"]}
    assert by_id["w"].change == "changed"
    assert by_id["w"].fields == [("days", "1", "3"), ("next", "old", "new")]
    assert by_id["old"].change == "removed"
    assert by_id["new"].change == "added"
    assert by_id["new"].fields == [("kind", "", "goal")]
    assert [name for name, _, _ in changes["others"]] == ["triggers"]
    assert diff(after, after) == {"steps": [], "others": []}
