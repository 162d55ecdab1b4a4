"""The states of an ad rule (``adrules_rules.status``) and the moves between them.

A rule's status is the member's choice: any status may be chosen on create (except
``archived``) and on edit, so every move is allowed. The sweep runs ``active`` and ``shadow``
rules on schedule; a ``shadow`` rule records what it would have done and writes nothing."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

RuleStatus = Literal["draft", "active", "shadow", "paused", "archived"]
RULE_STATUSES: tuple[RuleStatus, ...] = literal_states(RuleStatus)

RULE_DRAFT: Final = "draft"
RULE_ACTIVE: Final = "active"
RULE_SHADOW: Final = "shadow"
RULE_PAUSED: Final = "paused"
RULE_ARCHIVED: Final = "archived"

SCHEDULED_STATUSES: tuple[RuleStatus, ...] = (RULE_ACTIVE, RULE_SHADOW)
"""Statuses the sweep runs on schedule. A ``shadow`` rule runs like an active one and records
what it would have done — every condition, each action's before and after — writing nothing."""

RULES = StateMachine(
    table="adrules_rules",
    column="status",
    title="Ad rule",
    states=RULE_STATUSES,
    initial=(RULE_DRAFT, RULE_ACTIVE, RULE_SHADOW, RULE_PAUSED),
    transitions={s: tuple(t for t in RULE_STATUSES if t != s) for s in RULE_STATUSES},
    notes={RULE_ACTIVE: "run on schedule", RULE_SHADOW: "run on schedule, writes nothing"},
)
