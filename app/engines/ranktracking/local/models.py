"""Geo-grid scans and their cells (RT-121..RT-127).

A scan is one keyword searched for one business on Google Maps or the Local Finder from N×N
points; each point is a cell with its provider task and what it found. A scan's money is the
engine's ledger like any run's: its reservation entry is remembered on the scan, and the
reservation resolves once (``reservation_state`` leaves ``held`` with a conditional update).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import BigId, Json, UTCDateTime
from app.engines.ranktracking.local.cell_states import CELL_ABSENT as CELL_ABSENT
from app.engines.ranktracking.local.cell_states import CELL_FAILED as CELL_FAILED
from app.engines.ranktracking.local.cell_states import CELL_FOUND as CELL_FOUND
from app.engines.ranktracking.local.cell_states import CELL_NEW as CELL_NEW
from app.engines.ranktracking.local.cell_states import CELL_POSTED as CELL_POSTED
from app.engines.ranktracking.local.cell_states import CELL_STATES as CELL_STATES
from app.engines.ranktracking.local.cell_states import CELLS as CELLS
from app.engines.ranktracking.local.scan_states import COLLECTING as COLLECTING
from app.engines.ranktracking.local.scan_states import DONE as DONE
from app.engines.ranktracking.local.scan_states import FAILED as FAILED
from app.engines.ranktracking.local.scan_states import POSTING as POSTING
from app.engines.ranktracking.local.scan_states import RESERVED as RESERVED
from app.engines.ranktracking.local.scan_states import SCAN_RESERVATIONS as SCAN_RESERVATIONS
from app.engines.ranktracking.local.scan_states import SCAN_STATUSES as SCAN_STATUSES
from app.engines.ranktracking.local.scan_states import SCANS as SCANS

MAPS = "maps"
LOCAL_FINDER = "local_finder"
ENGINES = (MAPS, LOCAL_FINDER)


class GeoGrid(Base):
    __tablename__ = "rt_geogrids"
    __table_args__ = (
        Index("ix_rt_geogrids_workspace", "workspace_id", "id"),
        Index("ix_rt_geogrids_status", "status"),
        CheckConstraint("size IN (3, 5, 7, 9)", name="size"),
        CheckConstraint("engine IN ('maps', 'local_finder')", name="engine"),
        SCANS.check(),
        SCAN_RESERVATIONS.check(),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    organisation_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("organisations.id", ondelete="CASCADE")
    )
    created_by: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    keyword: Mapped[str] = mapped_column(String(200))
    engine: Mapped[str] = mapped_column(String(16))
    language_code: Mapped[str] = mapped_column(String(8))
    business_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    place_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    cid: Mapped[str | None] = mapped_column(String(40), nullable=True)
    domain: Mapped[str | None] = mapped_column(String(253), nullable=True)
    latitude: Mapped[float] = mapped_column(sa.Float)
    longitude: Mapped[float] = mapped_column(sa.Float)
    size: Mapped[int] = mapped_column(sa.Integer)
    spacing_m: Mapped[int] = mapped_column(sa.Integer)
    zoom: Mapped[int] = mapped_column(sa.Integer)
    depth: Mapped[int] = mapped_column(sa.Integer)
    queue: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    reserved_micros: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    settled_micros: Mapped[int | None] = mapped_column(sa.BigInteger, nullable=True)
    reservation_state: Mapped[str] = mapped_column(String(10))
    reservation_entry_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("rt_ledger.id", ondelete="SET NULL"), nullable=True
    )
    provider_cost: Mapped[Decimal | None] = mapped_column(sa.Numeric(14, 6), nullable=True)
    error_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    posted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class GeoGridCell(Base):
    __tablename__ = "rt_geogrid_cells"
    __table_args__ = (
        UniqueConstraint("geogrid_id", "row", "col"),
        Index("ix_rt_geogrid_cells_task", "task_id"),
        CELLS.check(),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    geogrid_id: Mapped[int] = mapped_column(BigId, ForeignKey("rt_geogrids.id", ondelete="CASCADE"))
    workspace_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    row: Mapped[int] = mapped_column(sa.Integer)
    col: Mapped[int] = mapped_column(sa.Integer)
    latitude: Mapped[float] = mapped_column(sa.Float)
    longitude: Mapped[float] = mapped_column(sa.Float)
    location_coordinate: Mapped[str] = mapped_column(String(40))
    task_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    state: Mapped[str] = mapped_column(String(10))
    rank: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    """The business's ``rank_group``; None when it is not listed (or the cell failed)."""
    competitors: Mapped[list[dict[str, Any]] | None] = mapped_column(Json, nullable=True)
    """The first listings of the page: rank, title, domain."""
    cost: Mapped[Decimal | None] = mapped_column(sa.Numeric(14, 6), nullable=True)
    """What the provider billed for the task (USD), as it reported it."""
    error_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    fetch_attempts: Mapped[int] = mapped_column(sa.Integer, default=0)
    fetched_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
