"""SQL functions whose name differs between SQLite and PostgreSQL, as one construct each."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement


class position(FunctionElement[int]):
    """``position(haystack, needle)``: the 1-based position of a substring, 0 when absent;
    case-sensitive on every backend and free of LIKE wildcards (SQLite's LIKE ignores ASCII
    case, PostgreSQL's does not)."""

    type = Integer()
    inherit_cache = True


@compiles(position, "sqlite")
def _position_sqlite(element: position, compiler: Any, **kw: Any) -> str:
    return f"instr({compiler.process(element.clauses, **kw)})"


@compiles(position)
def _position_default(element: position, compiler: Any, **kw: Any) -> str:
    return f"strpos({compiler.process(element.clauses, **kw)})"


class code_point_order(FunctionElement[str]):
    """A text expression compared by code point, as Python compares ``str`` (UTF-8 bytes in
    order): SQLite's default ``BINARY`` collation already does; PostgreSQL's depends on the
    database's locale unless told ``COLLATE "C"``. For an ``ORDER BY`` that must agree with a
    sort done in Python."""

    type = String()
    inherit_cache = True


@compiles(code_point_order, "sqlite")
def _code_point_order_sqlite(element: code_point_order, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.clauses, **kw))


@compiles(code_point_order)
def _code_point_order_default(element: code_point_order, compiler: Any, **kw: Any) -> str:
    return f'({compiler.process(element.clauses, **kw)}) COLLATE "C"'
