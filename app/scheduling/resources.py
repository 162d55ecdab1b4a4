"""Long-lived shared objects (HTTP clients, caches) created once per process and closed at exit."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Resources:
    """A registry of lazily-built objects, by key or by type; anything with ``aclose()`` is closed on
    shutdown."""

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}
        self._factories: dict[type[Any], Callable[[], Any]] = {}

    def get(self, key: str, factory: Callable[[], T]) -> T:
        if key not in self._items:
            self._items[key] = factory()
        item: T = self._items[key]
        return item

    def put(self, key: str, value: Any) -> None:
        self._items[key] = value

    def provide(self, kind: type[T], factory: Callable[[], T]) -> None:
        """Register how the one ``kind`` of the process is built (an engine's dependencies, by
        the composition root); built on the first :meth:`require`. Providing again replaces it."""
        self._factories[kind] = factory
        self._items.pop(_typed_key(kind), None)

    def require(self, kind: type[T]) -> T:
        """The process's ``kind``, built once by the factory :meth:`provide` registered."""
        factory = self._factories.get(kind)
        if factory is None:
            raise LookupError(f"nothing provides {kind.__name__}: build the runtime with wiring")
        item = self.get(_typed_key(kind), factory)
        if not isinstance(item, kind):
            raise TypeError(f"the factory of {kind.__name__} built a {type(item).__name__}")
        return item

    async def aclose(self) -> None:
        items, self._items = list(self._items.values()), {}
        for item in reversed(items):
            close = getattr(item, "aclose", None)
            if close is not None:
                result = close()
                if inspect.isawaitable(result):
                    await result


def _typed_key(kind: type[Any]) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"
