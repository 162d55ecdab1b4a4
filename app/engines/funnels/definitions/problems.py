"""What the validator says and what it checks against: a :class:`Problem` names the rule broken,
the node and the setting it concerns; :class:`KnownNames` holds what exists in the workspace, and
:func:`check_predicate` holds a predicate to both (its own rules, then the tags and lists it names).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec

from app.engines.funnels.contacts.channel_fields import PUSH_TOKEN_FIELD
from app.engines.funnels.contacts.predicate_checks import problems as predicate_problems
from app.engines.funnels.contacts.segments import Predicate, references


@dataclass(frozen=True, slots=True)
class Problem:
    rule: str
    """The requirement broken: FN-21 … FN-26."""
    code: str
    """A short stable name of the check (``entry``, ``unreachable``, ``cycle_without_wait``…)."""
    message: str
    node_id: str | None = None
    field: str | None = None
    """The node's setting the problem is about (``hour``), when it is about one: an editor shows
    the message next to that setting."""


@dataclass(frozen=True, slots=True)
class KnownNames:
    """What exists in the workspace, for reference checks."""

    tags: frozenset[str] = frozenset()
    lists: frozenset[str] = frozenset()
    fields: Mapping[str, str] = field(default_factory=dict)
    """Custom field key -> type."""
    funnels: frozenset[int] = frozenset()
    push_token_field: str = PUSH_TOKEN_FIELD
    """The custom field the workspace's push provider reads device tokens from."""


def check_predicate(
    predicate: Predicate, known: KnownNames, *, allow_context: bool = False
) -> list[str]:
    """The predicate's own rule violations, then the tags and lists it names that the workspace
    does not have (``allow_context``: a condition's, evaluated inside a run)."""
    out = predicate_problems(predicate, known.fields, allow_context=allow_context)
    refs = references(predicate)
    out += [f"unknown tag '{t}'" for t in sorted(refs.tags - known.tags)]
    out += [f"unknown list '{name}'" for name in sorted(refs.lists - known.lists)]
    return out


def decode_problems(exc: msgspec.ValidationError) -> list[Problem]:
    """A definition that does not even decode: one problem naming the field path."""
    return [Problem("FN-26", "schema", str(exc))]
