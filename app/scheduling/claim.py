"""The one claim primitive: turn due rows into work exactly once, on SQLite and PostgreSQL.

A :class:`Claim` is declared once per kind of work — the table, which rows are due, in what order,
the owner and expiry columns it stamps, any further columns it sets, and the columns it returns —
and compiled once per dialect into a single statement:

* PostgreSQL: ``UPDATE t SET … WHERE t.id = ANY(ARRAY(SELECT id FROM t WHERE <due> ORDER BY …
  LIMIT :limit FOR UPDATE OF t SKIP LOCKED)) RETURNING …``. Concurrent claimers skip each other's
  rows instead of waiting, and ``id = ANY(ARRAY(…))`` keeps the plan on primary-key lookups (with
  ``id IN (subquery)`` the planner may hash-join against a scan of the whole table).
* SQLite: ``UPDATE t SET … WHERE id IN (SELECT … LIMIT :limit) RETURNING …`` inside the write unit
  of work, whose ``BEGIN IMMEDIATE`` serialises claimers on the database lock. (SQLite silently
  drops ``FOR UPDATE``: a select-then-update there double-claims.)

A row claimed with an expiry is the claimer's until then; :meth:`Claim.renew` (the heartbeat) moves
the expiry on for rows the owner still holds and reports the ones it lost, :meth:`Claim.release`
hands rows back early. :class:`Lease` runs the heartbeat in the background while long work runs,
so the work can ask, before each outside call, whether it still owns the row.

The due predicate and the extra ``SET`` expressions are SQL text over the table's own columns:
statuses are written as literals so both planners can use the partial indexes of what is due,
each by its state machine (``machine.where``, :func:`claim_moves`).
Parameters are named (``:now``, ``:limit``, ``:owner``, ``:expires`` and any declared in
``params``); only constants of the declaration are interpolated.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table, bindparam, text
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.types import Integer, String, TypeEngine

from app.db.dialect import POSTGRESQL, dialect_name, row_count
from app.db.types import UTCDateTime

if TYPE_CHECKING:
    from app.clock import Clock
    from app.db.session import Database, WriteSession
    from app.db.states import StateMachine

log = logging.getLogger(__name__)

ClaimedRow = Any
"""A claimed row: a SQLAlchemy ``Row`` of the declared returning columns (by name or position)."""


_PARAMETER = re.compile(r"(?<![:\w]):(\w+)")
"""A named parameter (``:now``), not a cast (``::int``)."""


_ORDER_TERM = re.compile(r"(.+?)(\s+(?:ASC|DESC))?", re.IGNORECASE)
"""One term of an ``ORDER BY``: the expression and its direction."""

_PRELUDE_NAME = re.compile(r"\s*WITH\s+(\w+)\s+AS\b", re.IGNORECASE)


def claim_moves(machine: StateMachine, new: str) -> dict[str, str]:
    """The :attr:`Claim.sets` entry that moves a claimed row to ``new``, written by its machine
    (which refuses a state no declared move reaches); guard :attr:`Claim.due` with
    ``machine.where`` over the states the claim takes rows from."""
    column, value = machine.set_sql(new).split(" = ", 1)
    return {column: value}


class LeaseLost(Exception):
    """The claimer no longer owns the row (its lease expired and another claimer took it)."""


@dataclass(frozen=True, eq=False)
class Claim:
    """A declared claim. Build it at import time; statements are compiled on first use."""

    table: Table
    due: str
    """SQL predicate of the rows that may be claimed now (may use ``:now`` and declared params)."""
    order_by: str
    returning: tuple[str, ...]
    owner: str | None = None
    """Column stamped with the claimer's id (``:owner``)."""
    expires: str | None = None
    """Column stamped with the lease expiry (``:expires``); may be the due column itself, so an
    expired claim is simply due again."""
    sets: Mapping[str, str] = field(default_factory=dict)
    """Further ``column = SQL expression`` pairs the claim sets (e.g. ``attempts = attempts + 1``)."""
    params: Mapping[str, TypeEngine[Any]] = field(default_factory=dict)
    """Types of the further bind parameters the predicate or the ``sets`` use."""
    lists: frozenset[str] = frozenset()
    """Those of ``params`` that take a list of values (written ``IN :name``)."""
    held: str | None = None
    """Predicate a claimed row must still satisfy for a renewal to keep it (e.g. still pending).
    The renewal finds its rows by key: write a state test with ``machine.where_keyed``."""
    partition: str | None = None
    """A column whose values are claimed from in a given order (the job queues: the priority
    queue first). The statement scans each value's due rows on its own (``partition =
    :{partition}_0``, ``_1``, …, each up to ``limit`` rows in ``order_by`` order, skipping rows
    locked by other claimers) and claims the first ``limit`` by (the value's position,
    ``order_by``): one statement for any number of values, and each scan is an equality on an
    index's leading column, which the planner reads in order even on stale statistics — one
    ordered scan over a list of values would sort every due row instead."""
    key: str = "id"
    _compiled: dict[tuple[Any, ...], Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        names = {*self.returning, *self.sets, self.key}
        names |= {c for c in (self.owner, self.expires) if c}
        unknown = sorted(n for n in names if n not in self.table.c)
        if unknown:
            raise ValueError(f"{self.table.name} has no column {', '.join(unknown)}")
        undeclared = sorted(self.lists - set(self.params))
        if undeclared:
            raise ValueError(f"list parameters without a type: {', '.join(undeclared)}")

    # -- statements ---------------------------------------------------------------------------

    def _assignments(self) -> str:
        parts = [f"{column} = {expression}" for column, expression in self.sets.items()]
        if self.owner:
            parts.append(f"{self.owner} = :owner")
        if self.expires and self.expires not in self.sets:
            parts.append(f"{self.expires} = :expires")
        return ", ".join(parts)

    def _bind(self, sql: str) -> TextClause:
        types: dict[str, TypeEngine[Any]] = {
            "now": UTCDateTime(),
            "expires": UTCDateTime(),
            "limit": Integer(),
            "owner": String(),
            **self.params,
        }
        if self.partition is not None:
            column_type = self.table.c[self.partition].type
            types.update(
                {
                    name: column_type
                    for name in _PARAMETER.findall(sql)
                    if name.startswith(f"{self.partition}_")
                }
            )
        used = set(_PARAMETER.findall(sql))
        return text(sql).bindparams(
            *(
                bindparam(name, type_=type_, expanding=name in self.lists)
                for name, type_ in types.items()
                if name in used
            )
        )

    def _pick(self, dialect: str, partitions: int) -> str:
        """The select of the keys to claim (see :attr:`partition`)."""
        t, k = self.table.name, self.key
        lock = f" FOR UPDATE OF {t} SKIP LOCKED" if dialect == POSTGRESQL else ""
        if self.partition is None:
            return (
                f"SELECT {k} FROM {t} WHERE {self.due} ORDER BY {self.order_by} LIMIT :limit{lock}"  # noqa: S608
            )
        if partitions < 1:
            raise TypeError(f"the claim on {t} needs the {self.partition} values to claim from")
        terms = [_ORDER_TERM.fullmatch(term.strip()) for term in self.order_by.split(",")]
        if not all(terms):
            raise ValueError(f"cannot split the order of the claim on {t}: {self.order_by}")
        columns = "".join(f", {m[1]} AS claim_order_{n}" for n, m in enumerate(terms) if m)
        order = "".join(f", claim_order_{n}{m[2] or ''}" for n, m in enumerate(terms) if m)
        branches = " UNION ALL ".join(
            f"SELECT * FROM (SELECT {k}, {i} AS claim_rank{columns} FROM {t} "  # noqa: S608
            f"WHERE ({self.due}) AND {self.partition} = :{self.partition}_{i} "
            f"ORDER BY {self.order_by} LIMIT :limit{lock}) AS claim_{i}"
            for i in range(partitions)
        )
        return f"SELECT {k} FROM ({branches}) AS claimable ORDER BY claim_rank{order} LIMIT :limit"  # noqa: S608

    def statement(self, dialect: str, *, prelude: str = "", partitions: int = 0) -> Any:
        """The claim statement for ``dialect``; ``prelude`` is a ``WITH name AS (…)`` clause put in
        front (the queue uses it to write the previous batch's completions in the same round
        trip). Its statement must return rows (``RETURNING``): it runs to its end before the
        claim takes any row. ``partitions``: how many :attr:`partition` values it claims from."""
        cache_key = (dialect, prelude, partitions)
        compiled = self._compiled.get(cache_key)
        if compiled is not None:
            return compiled
        t, k = self.table.name, self.key
        pick = self._pick(dialect, partitions)
        where = f"{t}.{k} = ANY(ARRAY({pick}))" if dialect == POSTGRESQL else f"{k} IN ({pick})"
        first = _PRELUDE_NAME.match(prelude)
        if first:
            # A one-time filter on the prelude's rows runs the prelude to its end before any row is
            # claimed (left alone, a data-modifying WITH runs after the main statement). A claim
            # that skips a row which just stopped being due still holds that row's lock until it
            # ends; prelude first, two claimers whose preludes write rows the other's claim
            # touched wait for each other in one direction only, never in a cycle.
            where += f" AND (SELECT count(*) FROM {first[1]}) >= 0"  # noqa: S608
        returning = ", ".join(f"{t}.{c}" for c in self.returning)
        sql = f"{prelude} UPDATE {t} SET {self._assignments()} WHERE {where} RETURNING {returning}"  # noqa: S608
        compiled = self._bind(sql).columns(*(self.table.c[c] for c in self.returning))
        self._compiled[cache_key] = compiled
        return compiled

    def native_postgres(
        self, *, prelude: str = "", partitions: int = 0
    ) -> tuple[str, tuple[str, ...]]:
        """The PostgreSQL claim statement for the driver itself (a hot path that skips the SQL
        layer's parameter and row handling): ``$n`` placeholders, a list parameter as an array
        (``= ANY($n)``), and the parameter names in placeholder order."""
        cache_key = ("native", prelude, partitions)
        compiled = self._compiled.get(cache_key)
        if compiled is not None:
            return cast(tuple[str, tuple[str, ...]], compiled)
        statement = self.statement(POSTGRESQL, prelude=prelude, partitions=partitions)
        sql = str(statement.element.text)
        for name in self.lists:
            element = self.params[name].compile()
            sql = sql.replace(f"IN :{name}", f"= ANY(CAST(:{name} AS {element}[]))")
        names: list[str] = []

        def placeholder(match: re.Match[str]) -> str:
            if match[1] not in names:
                names.append(match[1])
            return f"${names.index(match[1]) + 1}"

        native = (_PARAMETER.sub(placeholder, sql), tuple(names))
        self._compiled[cache_key] = native
        return native

    def _renew_statement(self, dialect: str) -> Any:
        cache_key = ("renew", dialect)
        compiled = self._compiled.get(cache_key)
        if compiled is None:
            if not (self.owner and self.expires):
                raise TypeError(f"the claim on {self.table.name} has no owner and expiry")
            held = f" AND ({self.held})" if self.held else ""
            sql = (
                f"UPDATE {self.table.name} SET {self.expires} = :expires "  # noqa: S608
                f"WHERE {self.key} IN :keys AND {self.owner} = :owner{held} RETURNING {self.key}"
            )
            compiled = self._bind(sql).bindparams(bindparam("keys", expanding=True))
            self._compiled[cache_key] = compiled
        return compiled

    def _release_statement(self, dialect: str) -> Any:
        cache_key = ("release", dialect)
        compiled = self._compiled.get(cache_key)
        if compiled is None:
            if not (self.owner and self.expires):
                raise TypeError(f"the claim on {self.table.name} has no owner and expiry")
            sql = (
                f"UPDATE {self.table.name} SET {self.owner} = NULL, {self.expires} = :now "  # noqa: S608
                f"WHERE {self.key} IN :keys AND {self.owner} = :owner"
            )
            compiled = self._bind(sql).bindparams(bindparam("keys", expanding=True))
            self._compiled[cache_key] = compiled
        return compiled

    # -- running ------------------------------------------------------------------------------

    def partition_arguments(self, values: Sequence[Any]) -> dict[str, Any]:
        """The parameters naming the :attr:`partition` values to claim from, in their order."""
        return {f"{self.partition}_{i}": value for i, value in enumerate(values)}

    def _arguments(
        self,
        now: datetime,
        limit: int,
        owner: str | None,
        lease_seconds: float | None,
        params: Mapping[str, Any],
    ) -> dict[str, Any]:
        args: dict[str, Any] = {"now": now, "limit": limit, **params}
        if self.owner:
            if owner is None:
                raise TypeError(f"the claim on {self.table.name} needs an owner")
            args["owner"] = owner
        if lease_seconds is not None:
            args["expires"] = now + timedelta(seconds=lease_seconds)
        elif self.expires:
            raise TypeError(f"the claim on {self.table.name} needs lease_seconds")
        return args

    async def take_in(
        self,
        session: WriteSession,
        *,
        now: datetime,
        limit: int,
        owner: str | None = None,
        lease_seconds: float | None = None,
        prelude: str = "",
        partitions: Sequence[Any] = (),
        **params: Any,
    ) -> list[ClaimedRow]:
        """Claim up to ``limit`` due rows inside the caller's unit of work (so the caller can
        change the claimed rows further before it commits, e.g. advance their due time).
        ``partitions``: the :attr:`partition` values to claim from, first ones first."""
        statement = self.statement(
            dialect_name(session), prelude=prelude, partitions=len(partitions)
        )
        args = self._arguments(now, limit, owner, lease_seconds, params)
        args.update(self.partition_arguments(partitions))
        return list((await session.execute(statement, args)).all())

    async def take(
        self,
        db: Database,
        *,
        now: datetime,
        limit: int,
        owner: str | None = None,
        lease_seconds: float | None = None,
        **params: Any,
    ) -> list[ClaimedRow]:
        """Claim up to ``limit`` due rows in a unit of work of their own."""
        async with db.write() as uow:
            return await self.take_in(
                uow.session,
                now=now,
                limit=limit,
                owner=owner,
                lease_seconds=lease_seconds,
                **params,
            )

    async def renew(
        self,
        db: Database,
        keys: Iterable[Any],
        *,
        owner: str,
        now: datetime,
        lease_seconds: float,
        **params: Any,
    ) -> set[Any]:
        """Extend the lease of ``keys`` the owner still holds (and that still satisfy ``held``,
        with ``params``); returns those keys."""
        wanted = list(keys)
        if not wanted:
            return set()
        args = {
            **params,
            "keys": wanted,
            "owner": owner,
            "expires": now + timedelta(seconds=lease_seconds),
            "now": now,
        }
        async with db.write() as uow:
            result = await uow.session.execute(self._renew_statement(db.dialect), args)
            return {row[0] for row in result.all()}

    async def release(self, db: Database, keys: Iterable[Any], *, owner: str, now: datetime) -> int:
        """Hand rows back before their lease expires: they are due again at ``now``."""
        wanted = list(keys)
        if not wanted:
            return 0
        async with db.write() as uow:
            result = await uow.session.execute(
                self._release_statement(db.dialect), {"keys": wanted, "owner": owner, "now": now}
            )
            return row_count(result)


class Lease:
    """Rows claimed by one owner, kept alive by a heartbeat while long work runs.

    ``async with Lease(...)`` renews every third of the lease; a row the renewal no longer finds
    (finished, cancelled or taken over after an expiry) is dropped from :attr:`keys`. When renewals
    fail (say the database is locked) the lease runs out on its own clock: :meth:`holds` turns
    False once the last confirmed expiry has passed, so the work stops before its next outside
    call instead of racing a new owner.
    """

    def __init__(
        self,
        claim: Claim,
        db: Database,
        clock: Clock,
        *,
        owner: str,
        keys: Iterable[Any],
        lease_seconds: float,
        claimed_at: datetime | None = None,
        on_lost: Callable[[set[Any]], None] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        self.claim = claim
        self.on_lost = on_lost
        """Called (from the heartbeat) with the keys lost, or with every key once the lease ran
        out on this process's clock because renewals kept failing."""
        self.params = dict(params or {})
        self.db = db
        self.clock = clock
        self.owner = owner
        self.keys: set[Any] = set(keys)
        self.lease_seconds = lease_seconds
        self.valid_until = (claimed_at or clock.now()) + timedelta(seconds=lease_seconds)
        self.renewals = 0
        self._task: asyncio.Task[None] | None = None

    def holds(self, key: Any) -> bool:
        return key in self.keys and self.clock.now() < self.valid_until

    def check(self, key: Any) -> None:
        """Raise :class:`LeaseLost` unless the row is still this owner's."""
        if not self.holds(key):
            raise LeaseLost(f"{self.claim.table.name} {key} is no longer held by {self.owner}")

    def done(self, key: Any) -> None:
        """The work on ``key`` is finished: stop renewing it."""
        self.keys.discard(key)

    async def renew(self) -> None:
        """Renew now (the heartbeat calls this every third of the lease)."""
        if not self.keys:
            return
        now = self.clock.now()
        try:
            still = await self.claim.renew(
                self.db,
                self.keys,
                owner=self.owner,
                now=now,
                lease_seconds=self.lease_seconds,
                **self.params,
            )
        except Exception:
            log.warning(
                "could not renew the lease of %d %s rows",
                len(self.keys),
                self.claim.table.name,
                exc_info=True,
            )
            if self.keys and self.clock.now() >= self.valid_until:
                expired, self.keys = set(self.keys), set()
                self._lost(expired)
            return
        lost = self.keys - still
        self.keys &= still
        self.valid_until = now + timedelta(seconds=self.lease_seconds)
        self.renewals += 1
        if lost:
            self._lost(lost)

    def _lost(self, lost: set[Any]) -> None:
        log.warning("lost the lease of %s %s", self.claim.table.name, sorted(lost, key=str))
        if self.on_lost is not None:
            self.on_lost(lost)

    async def _heartbeat(self) -> None:
        while True:
            await self.clock.sleep(self.lease_seconds / 3)
            await self.renew()

    async def __aenter__(self) -> Lease:
        self._task = asyncio.create_task(self._heartbeat(), name="lease-heartbeat")
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
