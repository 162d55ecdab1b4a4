"""A stateful column's states and allowed transitions, declared once as data.

Each entity with a ``status``/``state`` column has one module (its ``states`` module) declaring
its states as a ``Literal`` and a :class:`StateMachine` built from it. The model's CHECK
constraint (:meth:`StateMachine.check`), the SQL text naming states (:meth:`StateMachine.where`),
the guard on a transition (:meth:`StateMachine.require`) and the state diagram in
``docs/states.md`` (:mod:`app.db.state_diagrams`) all come from that one declaration, so the
schema, the code and the documentation cannot name different states.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_args

from sqlalchemy import CheckConstraint, TextClause, Update, literal_column, text

_Update = TypeVar("_Update", bound=Update)

REGISTRY: dict[tuple[str, str], StateMachine] = {}
"""Every declared machine by ``(table, column)``: what the diagram generator and the schema
tests walk (filled as the states modules are imported; :mod:`app.models` imports them all)."""


class InvalidTransition(ValueError):
    """A write would move a row between two states its machine does not connect."""


def literal_states(literal: Any) -> tuple[Any, ...]:
    """The states a ``Literal[...]`` names, in declaration order."""
    states = get_args(literal)
    if not states or not all(isinstance(s, str) for s in states):
        raise TypeError(f"not a Literal of strings: {literal!r}")
    return tuple(states)


def sql_list(states: Iterable[str]) -> str:
    """``'a', 'b'``: states as SQL string literals (they are identifiers of ours, never input)."""
    return ", ".join(f"'{s}'" for s in states)


@dataclass(frozen=True)
class StateMachine:
    """The states of ``table.column`` and the moves between them.

    ``initial``: the states a row is created in. ``transitions``: for each state, the states a
    write may move it to (a state missing from the keys is final). ``final`` states are those
    with no way out. ``check_name``: the CHECK constraint's name where an older migration gave it
    one of its own (the naming convention prefixes ``ck_<table>_`` to it)."""

    table: str
    column: str
    states: tuple[str, ...]
    initial: tuple[str, ...]
    transitions: Mapping[str, tuple[str, ...]]
    title: str
    check_name: str | None = None
    notes: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        known = set(self.states)
        named = set(self.initial) | set(self.transitions) | set(self.notes)
        named |= {s for targets in self.transitions.values() for s in targets}
        if unknown := named - known:
            raise ValueError(f"{self.table}.{self.column}: unknown states {sorted(unknown)}")
        key = (self.table, self.column)
        if key in REGISTRY and REGISTRY[key] != self:
            raise ValueError(f"{self.table}.{self.column} declared twice")
        REGISTRY[key] = self

    @property
    def check_sql(self) -> str:
        return f"{self.column} IN ({sql_list(self.states)})"

    def check(self) -> CheckConstraint:
        """The model's CHECK constraint: the column holds one of the states and nothing else."""
        return CheckConstraint(self.check_sql, name=self.check_name or self.column)

    def where(self, *states: str, qualified: bool = False, negate: bool = False) -> str:
        """SQL text matching rows in ``states`` (``status = 'x'`` / ``status IN (...)``)."""
        column = f"{self.table}.{self.column}" if qualified else self.column
        return self._test(column, states, negate=negate)

    def _test(self, column: str, states: tuple[str, ...], *, negate: bool = False) -> str:
        unknown = set(states) - set(self.states)
        if unknown or not states:
            raise ValueError(f"{self.table}.{self.column}: unknown states {sorted(unknown)}")
        if len(states) == 1:
            return f"{column} {'!=' if negate else '='} '{states[0]}'"
        return f"{column} {'NOT IN' if negate else 'IN'} ({sql_list(states)})"

    def where_keyed(self, *states: str, qualified: bool = False) -> str:
        """The state test of a statement that finds its rows by key (``id = ANY(…)``, a lease's
        ``id IN :keys``): :meth:`where` written ``status || '' = 'x'``, the same test, which no
        partial index of those states can answer.

        Why: given ``id = ANY(…) AND status = 'pending'``, the planner may read every entry of
        the partial index of pending rows and filter them by id instead of looking the ids up.
        It does so whenever its statistics make that index look small — statistics taken when
        few rows were pending (a quiet hour, a fresh table) — and a burst then makes each such
        statement read the whole burst: measured, 3,400 to 5,400 pending entries read to record
        five to seven sends. Written this way the key is the only index the statement can use, whatever
        the statistics say. Statements that look for due rows keep :meth:`where`: the partial
        index is what they are for."""
        column = f"{self.table}.{self.column}" if qualified else self.column
        return self._test(f"{column} || ''", states)

    def keyed(self, *states: str) -> TextClause:
        """:meth:`where_keyed` as a clause for a SQLAlchemy statement (qualified by the table)."""
        return text(self.where_keyed(*states, qualified=True))

    @property
    def final(self) -> tuple[str, ...]:
        return tuple(s for s in self.states if not self.transitions.get(s))

    def edges(self) -> list[tuple[str, str]]:
        return [(a, b) for a in self.states for b in self.transitions.get(a, ())]

    def allows(self, old: str, new: str) -> bool:
        return new in self.transitions.get(old, ())

    def require(self, old: str, new: str) -> None:
        """Raise :class:`InvalidTransition` unless ``old → new`` is declared."""
        if not self.allows(old, new):
            raise InvalidTransition(f"{self.table}.{self.column}: {old} → {new} is not allowed")

    def move(self, row: Any, new: str) -> None:
        """Set ``row``'s state to ``new`` (a loaded model), refusing a move the table does not
        declare; writing the state a row already has changes nothing and is allowed."""
        old = getattr(row, self.column)
        if old != new:
            self.require(old, new)
        setattr(row, self.column, new)

    def sources(self, new: str) -> tuple[str, ...]:
        """The states a row may be in for a write to move it to ``new``."""
        return tuple(s for s in self.states if new in self.transitions.get(s, ()))

    def create(self, state: str) -> dict[str, str]:
        """``{column: state}`` for a new row (``Model(**M.create(X), ...)`` or an insert's
        values), refusing a state rows are not created in."""
        if state not in self.initial:
            raise InvalidTransition(f"{self.table}.{self.column}: rows are not created {state}")
        return {self.column: state}

    def transition(self, stmt: _Update, new: str, *, from_: Iterable[str] | None = None) -> _Update:
        """``stmt`` (an ``UPDATE`` of this table) setting the state to ``new`` for rows in
        ``from_`` only (default: every state declared to reach ``new``).

        The guard makes the statement itself unable to take an undeclared move: a row in any
        other state is left as it is (the caller sees it in the row count or ``RETURNING``).
        A move is made on rows found some other way (by key, by their run or contact), so the
        guard is written as :meth:`keyed`: it never sends the planner to a partial index of the
        source states. It is literal SQL, so the statement stays one string whatever it runs
        with and also runs once for many parameter sets (``executemany``)."""
        sources = self.sources(new) if from_ is None else tuple(from_)
        for old in sources:
            self.require(old, new)
        unindexed = stmt.table.c[self.column].op("||")(literal_column("''"))
        guard = unindexed.in_([literal_column(f"'{s}'") for s in sources])
        return stmt.where(guard).values({self.column: new})

    def set_sql(self, new: str, *, qualified: str | None = None) -> str:
        """``status = 'x'`` for a hand-written ``UPDATE … SET`` (``qualified``: a table alias),
        refusing a state no declared move reaches; guard its ``WHERE`` with :meth:`where` over
        :meth:`sources`."""
        if not self.sources(new):
            raise InvalidTransition(f"{self.table}.{self.column}: no move reaches {new}")
        column = f"{qualified}.{self.column}" if qualified else self.column
        return f"{column} = '{new}'"
