"""Dialect linter: no engine branches on the SQL dialect; the dialect lives in ``app/db``.

Where SQLite and PostgreSQL differ, ``app/db`` answers once (``app/db/dialect.py`` for the
statements spelled differently, ``app/db/driver_insert.py`` for the driver-level batch insert,
``concurrent_writers`` for whether writers run side by side). In ``app/engines`` this refuses what
would let an engine test the dialect itself: importing ``sqlalchemy.dialects``, importing the
dialect's name or test from ``app.db.dialect``, and reading ``.is_postgres``, ``.is_sqlite`` or
``.dialect`` of anything.

    python .ci/dialect_lint.py                         # the tree
    python .ci/dialect_lint.py --as app/engines/x.py - # one module from stdin, as if at that path
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = "app/engines"
DIALECT_TESTS = frozenset({"is_postgres", "is_sqlite", "dialect", "dialect_name"})
DIALECT_NAMES = frozenset({"is_postgres", "dialect_name", "POSTGRESQL", "SQLITE"})


def check_source(path: str, source: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(source, filename=path)):
        line = f"{path}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                modules.append(node.module or "")
            if any(
                m == "sqlalchemy.dialects" or m.startswith("sqlalchemy.dialects.") for m in modules
            ):
                yield f"{line}: imports sqlalchemy.dialects (per-dialect SQL belongs in app/db)"
            if isinstance(node, ast.ImportFrom) and node.module == "app.db.dialect":
                for alias in node.names:
                    if alias.name in DIALECT_NAMES:
                        yield f"{line}: imports {alias.name} (an engine does not test the dialect)"
        elif isinstance(node, ast.Attribute) and node.attr in DIALECT_TESTS:
            yield f"{line}: reads .{node.attr} (an engine does not test the dialect; ask app/db)"


def check_tree() -> list[str]:
    found: list[str] = []
    for file in sorted((REPO / CHECKED).rglob("*.py")):
        found.extend(check_source(file.relative_to(REPO).as_posix(), file.read_text()))
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--as", dest="as_path", help="check stdin as if it were this path")
    parser.add_argument("source", nargs="?", help="'-' to read the module from stdin")
    args = parser.parse_args(argv)
    if args.source == "-":
        problems = list(check_source(args.as_path, sys.stdin.read()))
    else:
        problems = check_tree()
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
