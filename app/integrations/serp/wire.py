"""The provider's JSON shapes, and their decoding.

Everything the provider sends is untrusted: it is decoded into these structs (unknown fields are
ignored, missing optional ones take defaults), and anything that does not fit becomes a
:class:`ProviderError` naming the endpoint — never an ``AttributeError`` deep in a caller.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Generic, TypeVar

import msgspec

from app.integrations.serp.errors import ProviderError

R = TypeVar("R")


class Head(msgspec.Struct):
    """Just the envelope's outcome, read before the rest so that an error answer is reported by its
    code even when its body does not have the success shape."""

    status_code: int
    status_message: str = ""


class WireTask(msgspec.Struct, Generic[R], kw_only=True):
    id: str = ""
    status_code: int
    status_message: str = ""
    cost: Decimal | None = None
    result_count: int | None = None
    data: dict[str, Any] | None = None
    result: list[R] | None = None

    def data_str(self, key: str) -> str:
        value = (self.data or {}).get(key)
        return value if isinstance(value, str) else ""


class Envelope(msgspec.Struct, Generic[R], kw_only=True):
    status_code: int
    status_message: str = ""
    cost: Decimal | None = None
    tasks_count: int = 0
    tasks_error: int = 0
    tasks: list[WireTask[R]] | None = None


class WireReady(msgspec.Struct):
    id: str
    tag: str | None = None


class WireReference(msgspec.Struct):
    """A page an item cites or is made of: an ``ai_overview_reference`` (``source``, ``domain``,
    ``url``, ``title``), a ``video_element`` (``source``, ``url``, ``title``), a
    ``people_also_ask_expanded_element`` (``domain``, ``url``, ``title``)."""

    type: str | None = None
    source: str | None = None
    domain: str | None = None
    url: str | None = None
    title: str | None = None


class WireElement(msgspec.Struct):
    """A nested element of an item (``video_element``, ``people_also_ask_element``,
    ``ai_overview_element``); only what names a page is read."""

    type: str | None = None
    source: str | None = None
    domain: str | None = None
    url: str | None = None
    title: str | None = None
    references: list[WireReference] | None = None
    expanded_element: list[WireReference] | None = None


class WireSerpItem(msgspec.Struct):
    type: str
    rank_group: int
    rank_absolute: int
    domain: str | None = None
    url: str | None = None
    title: str | None = None
    references: list[WireReference] | None = None
    """``ai_overview``: the sources the AI Overview cites."""
    items: list[WireElement] | None = None
    """``video``, ``people_also_ask``, ``ai_overview``, …: the item's own elements."""


class WireSerpResult(msgspec.Struct):
    keyword: str = ""
    item_types: list[str] | None = None
    items: list[WireSerpItem] | None = None


class WireMonthly(msgspec.Struct):
    year: int
    month: int
    search_volume: int | None = None


class WireKeyword(msgspec.Struct):
    keyword: str
    search_volume: int | None = None
    competition: str | None = None
    competition_index: int | None = None
    cpc: Decimal | None = None
    monthly_searches: list[WireMonthly] | None = None


_head_decoder = msgspec.json.Decoder(Head)


def decode_head(body: bytes) -> Head | None:
    """The envelope's status, or ``None`` when the body is not a provider envelope at all."""
    try:
        return _head_decoder.decode(body)
    except msgspec.MsgspecError:
        return None


def decode_envelope(body: bytes, result_type: type[R], endpoint: str) -> Envelope[R]:
    try:
        return msgspec.json.decode(body, type=Envelope[result_type])  # type: ignore[valid-type]
    except msgspec.MsgspecError as exc:
        raise ProviderError(f"unreadable answer from {endpoint}: {exc}") from None
