"""The provider's list of SERP locations (``GET /v3/serp/google/locations[/{country}]``).

The answer is one task whose ``result`` holds every location the provider can search from: its
code, full name (``Paris,Ile-de-France,France``), parent's code, country's ISO code and type
(``Country``, ``Region``, ``City``, ``Postal Code``, ``DMA Region``, …). The call is free.
"""

from __future__ import annotations

from typing import Final

import msgspec

LOCATIONS_PATH: Final = "/v3/serp/google/locations"


class LocationEntry(msgspec.Struct, frozen=True):
    """One location as the provider lists it (unknown fields are ignored)."""

    location_code: int
    location_name: str
    location_code_parent: int | None = None
    country_iso_code: str | None = None
    location_type: str = ""
