"""The table of every environment variable the settings read, with its default and its
docstring (``python -m app env``; the README's table is generated from it)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
from dataclasses import dataclass
from typing import Any, get_type_hints

from app.settings import Settings


@dataclass(frozen=True, slots=True)
class EnvVar:
    name: str
    default: str
    doc: str


def _field_docs(cls: type[Any]) -> dict[str, str]:
    """Attribute docstrings (a string literal right after a field) of a settings class."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def describe_environment(cls: type[Any] = Settings) -> list[EnvVar]:
    """Every environment variable the settings read, with its default and docstring."""
    out: list[EnvVar] = []
    hints = get_type_hints(cls)
    docs = _field_docs(cls)
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if dataclasses.is_dataclass(kind):
            out.extend(describe_environment(kind))  # type: ignore[arg-type]
            continue
        var = f.metadata.get("env")
        if var is not None:
            out.append(EnvVar(var, str(f.default), docs.get(f.name, "")))
    return out
