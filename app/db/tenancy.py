"""Statements scoped to one workspace: the only way engine code reads or writes a workspace's rows.

Every table that belongs to a workspace has a ``workspace_id`` column. A statement on such a table
starts here, with the workspace already in its ``WHERE`` clause, rather than as a bare
``select()``/``update()``/``delete()`` that has to remember the filter: a forgotten filter is then
not a query that quietly reads another workspace's rows but a construction the tenancy linter
(``.ci/tenancy_lint.py``) refuses. Statements that are not one workspace's by design (sweeps and
claims across workspaces, work on a row already claimed, reads keyed by a parent read here first)
are listed in the linter's allow-list (``.ci/tenancy_allowed.py``), each with its reason.

Each helper builds exactly the statement that was written by hand before — ``select(...)`` with
``Model.workspace_id == workspace_id`` in its ``WHERE`` clause — so the SQL, and what it returns,
do not change; further ``.where()``, ``.join()`` and ``.values()`` calls chain as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, overload

from sqlalchemy import ColumnElement, Delete, Exists, Select, Update, delete, exists, select, update

if TYPE_CHECKING:
    from sqlalchemy.sql._typing import _TypedColumnClauseArgument as _TCCA


# A mapped class (or an alias of one) with a ``workspace_id`` column. Typed loosely: a mapped
# class's attribute is an ``InstrumentedAttribute``, an alias's another type, and the linter, not
# the type checker, is what holds statements to these helpers.
WorkspaceOwned = Any


def in_workspace(model: WorkspaceOwned, workspace_id: int) -> ColumnElement[bool]:
    """``model.workspace_id = workspace_id``: the criterion for a join or an ``or_``/``and_``
    built by hand (a statement itself starts with one of the helpers below)."""
    criterion: ColumnElement[bool] = model.workspace_id == workspace_id
    return criterion


T0 = TypeVar("T0")
T1 = TypeVar("T1")
T2 = TypeVar("T2")
T3 = TypeVar("T3")
T4 = TypeVar("T4")


# The overloads mirror ``select()``'s, so a scoped statement's rows are typed as a bare one's.
@overload
def scoped_select(model: type[T0], workspace_id: int, /) -> Select[T0]: ...


@overload
def scoped_select(model: WorkspaceOwned, workspace_id: int, c0: _TCCA[T0], /) -> Select[T0]: ...


@overload
def scoped_select(
    model: WorkspaceOwned, workspace_id: int, c0: _TCCA[T0], c1: _TCCA[T1], /
) -> Select[T0, T1]: ...


@overload
def scoped_select(
    model: WorkspaceOwned, workspace_id: int, c0: _TCCA[T0], c1: _TCCA[T1], c2: _TCCA[T2], /
) -> Select[T0, T1, T2]: ...


@overload
def scoped_select(
    model: WorkspaceOwned,
    workspace_id: int,
    c0: _TCCA[T0],
    c1: _TCCA[T1],
    c2: _TCCA[T2],
    c3: _TCCA[T3],
    /,
) -> Select[T0, T1, T2, T3]: ...


@overload
def scoped_select(
    model: WorkspaceOwned,
    workspace_id: int,
    c0: _TCCA[T0],
    c1: _TCCA[T1],
    c2: _TCCA[T2],
    c3: _TCCA[T3],
    c4: _TCCA[T4],
    /,
) -> Select[T0, T1, T2, T3, T4]: ...


@overload
def scoped_select(
    model: WorkspaceOwned, workspace_id: int, /, *columns: Any
) -> Select[*tuple[Any, ...]]: ...


def scoped_select(
    model: WorkspaceOwned, workspace_id: int, /, *columns: Any
) -> Select[*tuple[Any, ...]]:
    """``SELECT columns … WHERE model.workspace_id = workspace_id``; the whole row of ``model``
    when no column is named. ``model`` need not be among ``columns`` (a count, or a joined child's
    columns): its table joins the ``FROM`` list through the criterion, as it would by hand."""
    return select(*(columns or (model,))).where(in_workspace(model, workspace_id))


def scoped_exists(model: WorkspaceOwned, workspace_id: int, *criteria: Any) -> Exists:
    """``EXISTS (SELECT * FROM model WHERE model.workspace_id = workspace_id AND criteria…)``."""
    return exists().where(in_workspace(model, workspace_id), *criteria)


def scoped_update(model: WorkspaceOwned, workspace_id: int) -> Update:
    """``UPDATE model … WHERE model.workspace_id = workspace_id``."""
    return update(model).where(in_workspace(model, workspace_id))


def scoped_delete(model: WorkspaceOwned, workspace_id: int) -> Delete:
    """``DELETE FROM model WHERE model.workspace_id = workspace_id``."""
    return delete(model).where(in_workspace(model, workspace_id))
