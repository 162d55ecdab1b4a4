"""States linter: a stateful column is written only through its :class:`StateMachine`.

Every ``status``/``state`` column has one machine (``app/db/states.py``, declared in the entity's
``states`` module). In ``app/`` this refuses the writes that would go around it:

- ``row.status = X`` (use ``MACHINE.move(row, X)``, which refuses an undeclared move);
- ``.values(status=X)`` or ``.values({"status": X})`` (use ``MACHINE.transition(stmt, X)``, which
  guards the ``WHERE`` with the states declared to reach ``X``, or ``MACHINE.create(X)`` for an
  insert);
- ``Model(status=X)`` for a model with a machine (use ``Model(**MACHINE.create(X))``, which
  refuses a state rows are not created in);
- SQL text naming a state by hand, ``status = '…'`` / ``status IN ('…')`` (use
  ``MACHINE.set_sql(X)`` and ``MACHINE.where(...)``);
- a claim's ``sets={"status": …}`` (use ``claim_moves(MACHINE, X)`` from ``app.scheduling.claim``).

And it refuses a state test that a partial index could answer in a statement that finds its rows
by key (use ``MACHINE.where_keyed(...)`` / ``MACHINE.keyed(...)``: see ``StateMachine.where_keyed``
for the burst it would otherwise read):

- SQL text with ``MACHINE.where(...)`` in the same ``WHERE`` as ``id = …`` / ``id IN …``;
- a ``.where()`` testing ``Model.id`` and ``Model.status`` of the same model side by side;
- a claim's ``held=MACHINE.where(...)`` (a renewal finds its rows by key).

The few attributes of the same name that are not a row's state are in ``ALLOWED`` with a reason.

    python .ci/states_lint.py                         # the tree
    python .ci/states_lint.py --as app/engines/x.py - # one module from stdin, as if at that path
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = "app"
SKIPPED = ("app/sandbox/", "app/demo/", "app/migrations/", "app/db/states.py")

ALLOWED: dict[str, str] = {
    "app/integrations/http_guard/errors.py": "an outbound call's HTTP status, not a row's state",
}


def machines() -> tuple[frozenset[str], frozenset[str]]:
    """The stateful column names, and the mapped classes that have one."""
    sys.path.insert(0, str(REPO))
    import app.models  # noqa: F401  (imports every states module with its table)
    from app.db.base import Base
    from app.db.states import REGISTRY

    columns = frozenset(column for _table, column in REGISTRY)
    classes = frozenset(
        mapper.class_.__name__
        for mapper in Base.registry.mappers
        if any((mapper.local_table.name, c) in REGISTRY for c in columns)
    )
    return columns, classes


def _sql_pattern(columns: frozenset[str]) -> re.Pattern[str]:
    names = "|".join(sorted(columns))
    return re.compile(rf"\b({names})\s*(=|!=|<>|\bIN\b|\bNOT IN\b)\s*\(?\s*'", re.IGNORECASE)


def _text(node: ast.AST) -> str | None:
    """A string literal's text; an f-string's with each placeholder as ``{}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            p.value if isinstance(p, ast.Constant) and isinstance(p.value, str) else "{}"
            for p in node.values
        )
    return None


def _check_call(
    line: str, node: ast.Call, columns: frozenset[str], classes: frozenset[str]
) -> Iterator[str]:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    named = [k.arg for k in node.keywords if k.arg in columns]
    if name == "values":
        for arg in node.args:
            if isinstance(arg, ast.Dict):
                named += [
                    k.value for k in arg.keys if isinstance(k, ast.Constant) and k.value in columns
                ]
        for column in named:
            yield (
                f"{line}: .values() writes {column}; use its machine's transition(stmt, new) or "
                "create(state)"
            )
    elif name in classes:
        for column in named:
            yield f"{line}: {name}({column}=...); use **its machine's create(state)"
    for keyword in node.keywords:
        if keyword.arg == "sets" and isinstance(keyword.value, ast.Dict):
            for key in keyword.value.keys:
                if isinstance(key, ast.Constant) and key.value in columns:
                    yield f"{line}: a claim sets {key.value} by hand; use claim_moves(machine, new)"


_KEY_SQL = re.compile(r"\bid\s*(?:=\s*ANY\b|IN\b|=\s*[:$(])", re.IGNORECASE)
_WHERE_SQL = re.compile(r"\bWHERE\b", re.IGNORECASE)
_STATE_TEST = "\0"
"""Where a ``MACHINE.where(...)`` placeholder sits in an f-string's text."""
KEYED = "tests its state with where(); use its machine's where_keyed()/keyed()"


def _calls(node: ast.AST, name: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
    )


def _keyed_sql(node: ast.JoinedStr) -> bool:
    """An f-string with a ``.where(...)`` state test in a ``WHERE`` that also names ``id``."""
    text = "".join(
        p.value
        if isinstance(p, ast.Constant) and isinstance(p.value, str)
        else _STATE_TEST
        if isinstance(p, ast.FormattedValue) and _calls(p.value, "where")
        else "{}"
        for p in node.values
    )
    return any(_STATE_TEST in part and _KEY_SQL.search(part) for part in _WHERE_SQL.split(text))


def _conjuncts(args: list[ast.expr]) -> Iterator[ast.expr]:
    for arg in args:
        if isinstance(arg, ast.Call) and getattr(arg.func, "id", "") == "and_":
            yield from _conjuncts(arg.args)
        else:
            yield arg


def _model_of(node: ast.AST, names: frozenset[str]) -> str | None:
    """``M`` of ``M.<one of names>``."""
    if isinstance(node, ast.Attribute) and node.attr in names and isinstance(node.value, ast.Name):
        return node.value.id
    return None


def _keyed_where(node: ast.Call, columns: frozenset[str]) -> bool:
    """A ``.where()`` with ``M.id == …`` / ``M.id.in_(…)`` / ``tuple_(M.id, …).in_(…)`` and a
    state test ``M.status == …`` / ``M.status.in_(…)`` of the same ``M`` among its terms."""
    keyed: set[str] = set()
    tested: set[str] = set()
    key = frozenset({"id"})
    for term in _conjuncts(node.args):
        if isinstance(term, ast.Compare) and isinstance(term.ops[0], ast.Eq):
            subject: ast.AST = term.left
        elif _calls(term, "in_"):
            subject = term.func.value  # type: ignore[attr-defined]
            if isinstance(subject, ast.Call) and getattr(subject.func, "id", "") == "tuple_":
                subject = subject.args[0] if subject.args else subject
        else:
            continue
        if model := _model_of(subject, key):
            keyed.add(model)
        if model := _model_of(subject, columns):
            tested.add(model)
    return bool(keyed & tested)


def check_source(
    path: str, source: str, columns: frozenset[str], classes: frozenset[str]
) -> Iterator[str]:
    sql = _sql_pattern(columns)
    tree = ast.parse(source, filename=path)
    # An f-string's pieces are read with it; a docstring or a bare string statement is prose.
    skipped = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    skipped |= {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        line = f"{path}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr in columns:
                    yield f"{line}: assigns .{target.attr}; use its machine's move(row, new)"
        elif isinstance(node, ast.Call):
            yield from _check_call(line, node, columns, classes)
            if _calls(node, "where") and _keyed_where(node, columns):
                yield f"{line}: a statement found by key {KEYED}"
        elif isinstance(node, ast.keyword) and node.arg == "held" and _calls(node.value, "where"):
            yield f"{line}: a claim's renewal (found by key) {KEYED}"
        elif id(node) not in skipped and (text := _text(node)) and sql.search(text):
            yield f"{line}: SQL text names a state by hand; use its machine's set_sql()/where()"
        if isinstance(node, ast.JoinedStr) and _keyed_sql(node):
            yield f"{line}: SQL text finding rows by id {KEYED}"


def check_tree() -> list[str]:
    columns, classes = machines()
    found: list[str] = []
    for file in sorted((REPO / CHECKED).rglob("*.py")):
        path = file.relative_to(REPO).as_posix()
        if path.startswith(SKIPPED) or file.name.endswith("states.py") or path in ALLOWED:
            continue
        found.extend(check_source(path, file.read_text(), columns, classes))
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--as", dest="as_path", help="check stdin as if it were this path")
    parser.add_argument("source", nargs="?", help="'-' to read the module from stdin")
    args = parser.parse_args(argv)
    if args.source == "-":
        columns, classes = machines()
        problems = list(check_source(args.as_path, sys.stdin.read(), columns, classes))
    else:
        problems = check_tree()
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} state write(s) or test(s) around their machine", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
