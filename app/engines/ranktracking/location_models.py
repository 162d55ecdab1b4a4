"""The provider's locations as last synced (RT-60): one row per location code the provider lists.

A code is the provider's (and Google Ads') id of a place and never changes meaning, so rows are
upserted by code; a location the provider stops listing keeps its row with ``dropped_at`` set, so a
schedule that uses it still shows its name (with a warning) and keeps running.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import UTCDateTime


class ProviderLocation(Base):
    __tablename__ = "rt_locations"
    __table_args__ = (Index("ix_rt_locations_country", "country_iso"),)

    code: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(300))
    """The provider's full name, e.g. ``Paris,Ile-de-France,France``."""
    search_text: Mapped[str] = mapped_column(Text)
    """The name, and the local names it is also known by, lower case without accents."""
    parent_code: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    country_iso: Mapped[str | None] = mapped_column(String(8), nullable=True)
    kind: Mapped[str] = mapped_column(String(40))
    """The provider's ``location_type``: Country, Region, City, Postal Code, DMA Region, …"""
    synced_at: Mapped[datetime] = mapped_column(UTCDateTime)
    """The last sync that listed it."""
    dropped_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """The first sync that no longer listed it (None while the provider lists it)."""
