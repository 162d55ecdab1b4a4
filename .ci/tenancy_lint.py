"""Tenancy linter: every statement on a workspace's rows goes through ``app/db/tenancy.py``.

A workspace-owned table is any mapped class with a ``workspace_id`` column (read from the models
themselves, so a new table is covered from its first line). In ``app/engines`` and ``app/web``, a
bare SQLAlchemy ``select()``, ``update()``, ``delete()`` or ``exists()`` whose statement names such
a class is refused: it is written with ``scoped_select``/``scoped_update``/``scoped_delete``/
``scoped_exists`` instead, which put the workspace into the ``WHERE`` clause by construction.

Paths that are platform-wide by design (sweepers and claims across every workspace, work on a row
already claimed, operator views) are in ``ALLOWED`` (``tenancy_allowed.py``), each with its
reason: a path ending in ``/`` allows a package, a module path the whole module, and
``path::function`` one function (and what it nests).

    python .ci/tenancy_lint.py                         # the tree
    python .ci/tenancy_lint.py --as app/engines/x.py - # one module from stdin, as if at that path
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = ("app/engines", "app/web")
STATEMENTS = frozenset({"select", "update", "delete", "exists"})
HELPERS = frozenset({"scoped_select", "scoped_update", "scoped_delete", "scoped_exists"})

from tenancy_allowed import ALLOWED  # noqa: E402  (beside this file)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    function: str
    statement: str
    tables: tuple[str, ...]

    def __str__(self) -> str:
        where = f"{self.path}:{self.line} ({self.function or 'module level'})"
        return (
            f"{where}: bare {self.statement}() on workspace-owned {', '.join(self.tables)}; "
            "use app.db.tenancy.scoped_* or allow-list the path with a reason"
        )


def workspace_owned_classes() -> frozenset[str]:
    """The names of every mapped class whose table has a ``workspace_id`` column."""
    sys.path.insert(0, str(REPO))
    import app.models  # noqa: F401  (registers every table)
    from app.db.base import Base

    return frozenset(
        mapper.class_.__name__
        for mapper in Base.registry.mappers
        if "workspace_id" in mapper.local_table.c
    )


def _called_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name):
            return node.func.id
        if isinstance(node.func, ast.Attribute):
            return node.func.attr if isinstance(node.func.value, ast.Name) else None
    return None


def _chain_top(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.AST:
    """The whole method chain a statement constructor starts (``select(...).where(...)...``)."""
    while True:
        parent = parents.get(node)
        attribute_of = isinstance(parent, ast.Attribute) and parent.value is node
        called = isinstance(parent, ast.Call) and parent.func is node
        if parent is None or not (attribute_of or called):
            return node
        node = parent


def _hand_written_filter(node: ast.AST) -> str | None:
    """``<table>.workspace_id == ...``: the table's expression."""
    if (
        isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Attribute)
        and node.left.attr == "workspace_id"
    ):
        return ast.unparse(node.left.value)
    return None


def _named_tables(top: ast.AST, start: ast.AST, owned: frozenset[str]) -> set[str]:
    """Owned classes the chain names, outside nested statements (each is checked on its own)
    and outside the scoped helpers (they carry their own workspace)."""
    found: set[str] = set()
    stack = [top]
    while stack:
        node = stack.pop()
        name = _called_name(node)
        if node is not start and name in STATEMENTS | HELPERS:
            continue
        if isinstance(node, ast.Name) and node.id in owned:
            found.add(node.id)
        elif (table := _hand_written_filter(node)) is not None:
            # A filter written by hand on a table the names above do not show (a Core table's
            # ``.c``, a model held in a variable).
            found.add(table)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _functions(tree: ast.AST) -> dict[ast.AST, str]:
    """Each node → the qualified name of the function (or class) it sits in."""
    owner: dict[ast.AST, str] = {}

    def visit(node: ast.AST, qualname: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = qualname
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = f"{qualname}.{child.name}" if qualname else child.name
            owner[child] = inner
            visit(child, inner)

    visit(tree, "")
    return owner


def _allowed(path: str, function: str) -> bool:
    if path in ALLOWED or any(e.endswith("/") and path.startswith(e) for e in ALLOWED):
        return True
    parts = function.split(".")
    return any(f"{path}::{'.'.join(parts[:n])}" in ALLOWED for n in range(1, len(parts) + 1))


def _table_aliases(tree: ast.AST, owned: frozenset[str]) -> frozenset[str]:
    """Names bound to an owned model's Core table (``_CONTACTS = Contact.__table__``, maybe cast)."""
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        if any(
            isinstance(n, ast.Attribute)
            and n.attr == "__table__"
            and isinstance(n.value, ast.Name)
            and n.value.id in owned
            for n in ast.walk(node.value)
        ):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            aliases.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(aliases)


def check_source(path: str, source: str, owned: frozenset[str]) -> Iterator[Finding]:
    tree = ast.parse(source, filename=path)
    owned = owned | _table_aliases(tree, owned)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    owner = _functions(tree)
    for node in ast.walk(tree):
        statement = _called_name(node)
        if statement not in STATEMENTS:
            continue
        tables = _named_tables(_chain_top(node, parents), node, owned)
        function = owner.get(node, "")
        if tables and not _allowed(path, function):
            line = getattr(node, "lineno", 0)
            yield Finding(path, line, function, statement or "", tuple(sorted(tables)))


def check_tree(owned: frozenset[str]) -> list[Finding]:
    findings: list[Finding] = []
    for root in CHECKED:
        for file in sorted((REPO / root).rglob("*.py")):
            path = file.relative_to(REPO).as_posix()
            findings.extend(check_source(path, file.read_text(), owned))
    return findings


def _defines(module: Path, qualname: str) -> bool:
    owner = _functions(ast.parse(module.read_text()))
    return any(
        name == qualname and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for node, name in owner.items()
    )


def stale_entries() -> list[str]:
    """Entries whose module or function no longer exists (a stale entry could hide a new one)."""
    stale: list[str] = []
    for entry in ALLOWED:
        path, _, function = entry.partition("::")
        module = REPO / path
        if not module.exists() or (function and not _defines(module, function)):
            stale.append(entry)
    return stale


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--as", dest="as_path", help="check stdin as if it were this path")
    parser.add_argument("source", nargs="?", help="'-' to read the module from stdin")
    args = parser.parse_args(argv)
    owned = workspace_owned_classes()
    if args.source == "-":
        findings = list(check_source(args.as_path, sys.stdin.read(), owned))
        problems = [str(f) for f in findings]
    else:
        problems = [str(f) for f in check_tree(owned)]
        problems += [f"{entry}: allow-listed but not found" for entry in stale_entries()]
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
