"""Finding one business among the listings of a Google Maps page.

A business is named the way an SEO knows it: its Google place id, its CID (the number in its
Maps URL), its website's domain, or its name as Maps shows it. The strongest identifier given
decides: an id never falls back to a looser match, because a competitor with a similar name or a
shared domain (a franchise) would then be reported as the business.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from app.integrations.serp import MapsListing


@dataclass(frozen=True)
class Business:
    """How a tracked business is recognised; at least one field is set."""

    place_id: str | None = None
    cid: str | None = None
    domain: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if not any((self.place_id, self.cid, self.domain, self.name)):
            raise ValueError("a business needs a place_id, a cid, a domain or a name")


def find_business(listings: Sequence[MapsListing], business: Business) -> MapsListing | None:
    """The best-ranked listing of ``business``, or ``None`` when it is not on the page."""
    ordered = sorted(listings, key=lambda listing: listing.rank_absolute)
    if business.place_id:
        return next((x for x in ordered if x.place_id == business.place_id), None)
    if business.cid:
        return next((x for x in ordered if x.cid == business.cid), None)
    if business.domain:
        wanted = _host(business.domain)
        return next((x for x in ordered if x.domain and _same_site(_host(x.domain), wanted)), None)
    wanted_name = _name_key(business.name or "")
    return next((x for x in ordered if _name_key(x.title) == wanted_name), None)


def _host(domain: str) -> str:
    host = domain.strip().lower().removeprefix("https://").removeprefix("http://")
    host = host.split("/", 1)[0].rstrip(".")
    return host.removeprefix("www.")


def _same_site(host: str, wanted: str) -> bool:
    """The listing's site is the wanted domain or one of its subdomains."""
    return host == wanted or host.endswith("." + wanted)


def _name_key(name: str) -> str:
    """A name compared without case, accents, punctuation or repeated spaces ("Café  de l'Est"
    is "cafe de l est")."""
    decomposed = unicodedata.normalize("NFKD", name.casefold())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(re.sub(r"[\W_]+", " ", plain).split())
