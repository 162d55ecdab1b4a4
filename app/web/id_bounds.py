"""Integers in paths and queries bounded by the column they are looked up in (PL-10).

Every integer path parameter names a row (or a version number); :data:`PARAMETER_COLUMNS` says
which column each one is compared with, and the accepted range is that column's: ``Integer`` holds
1 to 2³¹ − 1, ``BigInteger`` 1 to 2⁶³ − 1 (ids and version numbers start at 1). A number outside
it cannot name anything, so a path answers 404; an id in the query answers 422 ``out_of_range``
naming the parameter. Without this, PostgreSQL refused the value ("out of int32 range") with a
500, while SQLite, whose integers are all 64-bit, hid it.

The check runs after the caller is authenticated (:func:`app.web.access.require_caller` calls
:func:`check_request`), so an anonymous caller hears 401 whatever the id. Public routes with an
integer path parameter (the webhook receivers under ``/hooks/funnels/{workspace_id}``) carry
:func:`within_id_bounds` as their own guard. :func:`verify_id_bounds` runs when the application is
built and refuses to start it while an integer path parameter (or an ``…_id`` query parameter)
has no known column, or an integer path parameter is checked by no guard.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from litestar import Litestar
from litestar.connection import ASGIConnection
from litestar.exceptions import ImproperlyConfiguredException
from litestar.handlers import BaseRouteHandler, HTTPRouteHandler

import app.models  # noqa: F401 - every table registered on the metadata the columns are read from
from app.db.base import Base
from app.db.keyset import highest_value
from app.errors import NotFound, ValidationFailed

PARAMETER_COLUMNS: dict[str, str] = {
    "account_id": "adrules_ad_accounts.id",
    "alert_id": "rt_alert_rules.id",
    "annotation_id": "rt_annotations.id",
    "batch_record_id": "adrules_batches.id",
    "campaign_id": "campaigns.id",
    "contact_id": "contacts.id",
    "funnel_id": "funnels.id",
    "geogrid_id": "rt_geogrids.id",
    "invitation_id": "invitations.id",
    "job_id": "bulk_jobs.id",
    "key_id": "api_keys.id",
    "link_id": "rt_report_links.id",
    "list_id": "rt_keyword_lists.id",
    "mobile_of": "rt_schedules.id",
    "number": "funnel_versions.number",
    "rule_id": "adrules_rules.id",
    "run_id": "funnel_runs.id",
    "schedule_id": "rt_schedules.id",
    "segment_id": "saved_segments.id",
    "source_id": "funnel_webhook_sources.id",
    "task_id": "adrules_tasks.id",
    "user_id": "users.id",
    "workspace_id": "workspaces.id",
}
"""Parameter name → ``table.column`` it is looked up in."""

PREFIX_COLUMNS: dict[tuple[str, str], str] = {
    ("/api/v1/ranktracking/", "rule_id"): "rt_alert_rules.id",
    ("/api/v1/ranktracking/", "run_id"): "rt_runs.id",
}
"""``(path prefix, name)`` → column, where a name means another table under that prefix."""


@dataclass(frozen=True, slots=True)
class Bound:
    name: str
    column: str
    low: int
    high: int


@dataclass(frozen=True, slots=True)
class Plan:
    """The checks of one route: its path parameters, and per method its query parameters."""

    path: tuple[Bound, ...]
    query: dict[str, tuple[Bound, ...]]


def column_range(column: str) -> tuple[int, int]:
    """``(low, high)`` of ``table.column``, from its type (the server database's, not SQLite's
    variant: the API answers alike on both)."""
    table, name = column.split(".")
    type_ = Base.metadata.tables[table].c[name].type
    try:
        return 1, highest_value(type_)
    except TypeError:
        raise ImproperlyConfiguredException(f"{column} is not an integer column") from None


def column_of(path: str, name: str) -> str | None:
    for (prefix, param), column in PREFIX_COLUMNS.items():
        if param == name and path.startswith(prefix):
            return column
    return PARAMETER_COLUMNS.get(name)


def _bound(path: str, name: str) -> Bound | None:
    column = column_of(path, name)
    if column is None:
        return None
    low, high = column_range(column)
    return Bound(name, column, low, high)


def _is_int(annotation: Any) -> bool:
    if annotation is int:
        return True
    if get_origin(annotation) in (Union, UnionType):
        args = [a for a in get_args(annotation) if a is not NoneType]
        return args == [int]
    return False


def _int_path_parameters(route: Any) -> list[str]:
    params = route.path_parameters
    values: Iterable[Any] = params.values() if isinstance(params, dict) else params
    return [p.name for p in values if p.type is int]


def _int_query_parameters(handler: HTTPRouteHandler, path_names: set[str]) -> list[str]:
    names = []
    for name, field in handler.parsed_fn_signature.parameters.items():
        kwarg = field.kwarg_definition
        if name in path_names or not _is_int(field.annotation):
            continue
        if kwarg is not None and (getattr(kwarg, "header", None) or getattr(kwarg, "cookie", None)):
            continue
        names.append(getattr(kwarg, "query", None) or name)
    return names


def _query_bounds(
    path: str, handler: HTTPRouteHandler, path_names: set[str], problems: list[str]
) -> tuple[Bound, ...]:
    found = []
    for name in _int_query_parameters(handler, path_names):
        bound = _bound(path, name)
        if bound is not None:
            found.append(bound)
        elif name.endswith("_id"):
            problems.append(f"{path}: no column bounds the query id {name!r}")
    return tuple(found)


def _plans(app: Litestar) -> tuple[dict[str, Plan], list[str]]:
    plans: dict[str, Plan] = {}
    problems: list[str] = []
    for route in app.routes:
        path_names = _int_path_parameters(route)
        path_bounds = []
        for name in path_names:
            bound = _bound(route.path, name)
            if bound is None:
                problems.append(f"{route.path}: no column bounds the integer {name!r}")
            else:
                path_bounds.append(bound)
        query: dict[str, tuple[Bound, ...]] = {}
        handlers = getattr(route, "route_handlers", ())
        for handler in (h for h in handlers if isinstance(h, HTTPRouteHandler)):
            found = _query_bounds(route.path, handler, set(path_names), problems)
            query.update(dict.fromkeys(handler.http_methods, found) if found else {})
            # Litestar's own OPTIONS answer reads no parameter.
            if path_bounds and handler.http_methods != {"OPTIONS"} and not _guarded(handler):
                where = f"{'/'.join(sorted(handler.http_methods))} {route.path}"
                problems.append(f"{where}: no guard checks its integer path parameters")
        if path_bounds or query:
            # Keyed as the router names the matched route (``scope["path_template"]``).
            plans[route.path_format] = Plan(tuple(path_bounds), query)
    return plans, problems


def _guarded(handler: HTTPRouteHandler) -> bool:
    from app.web.access import PUBLIC, require_caller

    guards = handler.resolve_guards()
    if within_id_bounds in guards:
        return True
    # require_caller checks the bounds of authenticated routes; it waves public ones through.
    return require_caller in guards and not handler.opt.get(PUBLIC)


def verify_id_bounds(app: Litestar) -> None:
    """Refuse an application with an integer path parameter (or an ``…_id`` query parameter) no
    column bounds, or an integer path parameter no guard checks; keep the checks for the guard."""
    plans, problems = _plans(app)
    if problems:
        raise ImproperlyConfiguredException(
            "Integer parameters without a bound:\n  " + "\n  ".join(problems)
        )
    app.state.id_bounds = plans


def check_request(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """404 for a path id out of its column's range, 422 ``out_of_range`` for a query id."""
    plans: dict[str, Plan] | None = connection.app.state.get("id_bounds")
    plan = plans.get(str(connection.scope.get("path_template", ""))) if plans else None
    if plan is None:
        return
    path_params = connection.path_params
    for bound in plan.path:
        value = path_params.get(bound.name)
        if isinstance(value, int) and not bound.low <= value <= bound.high:
            raise NotFound("Not found.")
    query = plan.query.get(str(connection.scope.get("method", "")), ())
    if not query:
        return
    params = connection.query_params
    for bound in query:
        text = params.get(bound.name)
        if text is None:
            continue
        try:
            value = int(text.strip())
        except ValueError:
            continue  # not a number: the parameter's own validation answers
        if not bound.low <= value <= bound.high:
            message = f"from {bound.low} to {bound.high}"
            raise ValidationFailed(
                f"{bound.name}: {message}",
                code="out_of_range",
                details=[{"field": bound.name, "message": message, "code": "out_of_range"}],
            )


async def within_id_bounds(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """The guard of a public route with an integer path parameter (no caller to authenticate)."""
    check_request(connection)
