"""How a settings field is declared (:func:`env`: its environment variable beside its default)
and how a group of fields is read from an environment mapping (:func:`load_group`), refusing a
value that cannot be used (:class:`SettingsError`)."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from dataclasses import field
from decimal import Decimal
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints


class SettingsError(ValueError):
    """An environment variable holds a value that cannot be used."""


def env(name: str, default: Any) -> Any:
    """Declare a settings field read from the environment variable ``name``."""
    return field(default=default, metadata={"env": name})


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def convert(name: str, raw: str, kind: Any) -> Any:
    try:
        if kind is bool:
            lowered = raw.strip().lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise ValueError("expected true or false")
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
        if kind is Decimal:
            return Decimal(raw)
        if kind is Path:
            return Path(raw)
        return raw
    except (ValueError, ArithmeticError) as exc:
        raise SettingsError(f"{name}={raw!r}: {exc}") from exc


def load_group(cls: type[Any], environ: Mapping[str, str]) -> Any:
    hints = get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if dataclasses.is_dataclass(kind):
            values[f.name] = load_group(kind, environ)  # type: ignore[arg-type]
            continue
        var = f.metadata.get("env")
        if var is not None and var in environ:
            if get_origin(kind) in (Union, types.UnionType):
                kind = next(a for a in get_args(kind) if a is not type(None))
            values[f.name] = convert(var, environ[var], kind)
    return cls(**values)
