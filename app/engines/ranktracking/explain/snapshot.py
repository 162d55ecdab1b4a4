"""A compact copy of one results page: what is needed to explain a movement, and no more.

Kept per keyword and child run: the organic results in order (domain and URL), each SERP feature
with the domains it links to (a featured snippet's site, the businesses of a local pack, the
channels of a video carousel, the pages answering "people also ask"), and the references an AI
Overview cites. Titles and descriptions are not kept. URLs on the result's own domain are stored
as a path (``/shoes``, or ``~/shoes`` for its ``www.`` host); the JSON is zlib-compressed.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import msgspec

from app.integrations.serp import SerpItem, SerpTaskResult

VERSION = 1
ORGANIC = "organic"
AI_OVERVIEW = "ai_overview"


class Snapshot(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The stored form (short keys: it is kept for every keyword of every run)."""

    v: int = VERSION
    o: list[tuple[str, str]] = msgspec.field(default_factory=list)
    """Organic results, best first: (domain, URL) — the domain without ``www.``."""
    f: list[tuple[str, int, list[str]]] = msgspec.field(default_factory=list)
    """Features in page order: (type, first ``rank_absolute``, domains it links to)."""
    a: list[tuple[str, str]] = msgspec.field(default_factory=list)
    """AI Overview references: (domain, URL)."""


@dataclass(frozen=True, slots=True)
class Page:
    """A decoded snapshot, with full URLs."""

    organic: list[tuple[str, str]]
    features: dict[str, list[str]]
    """Feature type → the domains it links to (empty: it links to none)."""
    ai_references: list[tuple[str, str]]

    def domains(self) -> list[str]:
        return [d for d, _ in self.organic]

    def position_of(self, domain: str) -> int | None:
        """The best organic rank of ``domain`` or one of its subdomains."""
        for rank, (host, _) in enumerate(self.organic, start=1):
            if matches(host, domain):
                return rank
        return None


def bare(host: str | None) -> str:
    return (host or "").strip().lower().removeprefix("www.")


def matches(host: str | None, domain: str) -> bool:
    """``host`` is ``domain`` or one of its subdomains (``www.`` ignored)."""
    host, wanted = bare(host), bare(domain)
    return bool(host) and (host == wanted or host.endswith("." + wanted))


def _short(domain: str, url: str | None) -> str:
    if not url:
        return ""
    for prefix, mark in ((f"https://{domain}/", "/"), (f"https://www.{domain}/", "~/")):
        if url.startswith(prefix):
            return mark + url[len(prefix) :]
    return url


def _full(domain: str, stored: str) -> str:
    if stored.startswith("/"):
        return f"https://{domain}{stored}"
    if stored.startswith("~/"):
        return f"https://www.{domain}{stored[1:]}"
    return stored


def of_result(result: SerpTaskResult) -> Snapshot:
    organic: list[tuple[str, str]] = []
    features: list[tuple[str, int, list[str]]] = []
    by_type: dict[str, list[str]] = {}
    references: list[tuple[str, str]] = []
    for item in sorted(result.items, key=lambda i: i.rank_absolute):
        if item.type == ORGANIC:
            domain = bare(item.domain)
            organic.append((domain, _short(domain, item.url)))
            continue
        owners = _owners(item)
        if item.type in by_type:
            by_type[item.type].extend(d for d in owners if d not in by_type[item.type])
        else:
            by_type[item.type] = owners
            features.append((item.type, item.rank_absolute, by_type[item.type]))
        if item.type == AI_OVERVIEW:
            for source in item.sources:
                domain = bare(source.domain)
                references.append((domain, _short(domain, source.url)))
    return Snapshot(o=organic, f=features, a=references)


def _owners(item: SerpItem) -> list[str]:
    return [bare(d) for d in item.domains()]


def encode(snapshot: Snapshot) -> bytes:
    return zlib.compress(msgspec.json.encode(snapshot), 9)


_decoder = msgspec.json.Decoder(Snapshot)


def decode(body: bytes) -> Page:
    snap = _decoder.decode(zlib.decompress(body))
    return Page(
        organic=[(d, _full(d, u)) for d, u in snap.o],
        features={kind: list(owners) for kind, _, owners in snap.f},
        ai_references=[(d, _full(d, u)) for d, u in snap.a],
    )


def organic_domains(body: bytes) -> list[str]:
    """Only the organic domains of a stored page, best first (no URL is rebuilt)."""
    return [d for d, _ in _decoder.decode(zlib.decompress(body)).o]
