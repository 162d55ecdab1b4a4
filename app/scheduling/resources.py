"""Long-lived shared objects (HTTP clients, caches) created once per process and closed at exit."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Resources:
    """A keyed registry of lazily-built objects; anything with ``aclose()`` is closed on shutdown."""

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}

    def get(self, key: str, factory: Callable[[], T]) -> T:
        if key not in self._items:
            self._items[key] = factory()
        item: T = self._items[key]
        return item

    def put(self, key: str, value: Any) -> None:
        self._items[key] = value

    async def aclose(self) -> None:
        items, self._items = list(self._items.values()), {}
        for item in reversed(items):
            close = getattr(item, "aclose", None)
            if close is not None:
                result = close()
                if inspect.isawaitable(result):
                    await result
