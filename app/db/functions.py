"""SQL functions whose name differs between SQLite and PostgreSQL, as one construct each."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer
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
