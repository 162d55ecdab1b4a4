"""Geo-grid scans of local search and their cells (RT-121..RT-127).

Revision ID: 0660_ranktracking_geogrids
Revises: 0650_ranktracking_report_links
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0660_ranktracking_geogrids"
down_revision = "0650_ranktracking_report_links"
branch_labels = None
depends_on = None


def _fk(column: str, target: str, ondelete: str, *, nullable: bool = False) -> sa.Column[int]:
    return sa.Column(column, BigId, sa.ForeignKey(target, ondelete=ondelete), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "rt_geogrids",
        sa.Column("id", BigId, primary_key=True),
        _fk("workspace_id", "workspaces.id", "CASCADE"),
        _fk("organisation_id", "organisations.id", "CASCADE"),
        _fk("created_by", "users.id", "SET NULL", nullable=True),
        sa.Column("keyword", sa.String(200), nullable=False),
        sa.Column("engine", sa.String(16), nullable=False),
        sa.Column("language_code", sa.String(8), nullable=False),
        sa.Column("business_name", sa.String(200), nullable=True),
        sa.Column("place_id", sa.String(200), nullable=True),
        sa.Column("cid", sa.String(40), nullable=True),
        sa.Column("domain", sa.String(253), nullable=True),
        sa.Column("latitude", sa.Float, nullable=False),
        sa.Column("longitude", sa.Float, nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("spacing_m", sa.Integer, nullable=False),
        sa.Column("zoom", sa.Integer, nullable=False),
        sa.Column("depth", sa.Integer, nullable=False),
        sa.Column("queue", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reserved_micros", sa.BigInteger, nullable=False),
        sa.Column("settled_micros", sa.BigInteger, nullable=True),
        sa.Column("reservation_state", sa.String(10), nullable=False),
        _fk("reservation_entry_id", "rt_ledger.id", "SET NULL", nullable=True),
        sa.Column("provider_cost", sa.Numeric(14, 6), nullable=True),
        sa.Column("error_message", sa.Text, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("posted_at", UTCDateTime, nullable=True),
        sa.Column("finished_at", UTCDateTime, nullable=True),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.CheckConstraint("size IN (3, 5, 7, 9)", name="size"),
        sa.CheckConstraint("engine IN ('maps', 'local_finder')", name="engine"),
    )
    op.create_index("ix_rt_geogrids_workspace", "rt_geogrids", ["workspace_id", "id"])
    op.create_index("ix_rt_geogrids_status", "rt_geogrids", ["status"])
    op.create_table(
        "rt_geogrid_cells",
        sa.Column("id", BigId, primary_key=True),
        _fk("geogrid_id", "rt_geogrids.id", "CASCADE"),
        _fk("workspace_id", "workspaces.id", "CASCADE"),
        sa.Column("row", sa.Integer, nullable=False),
        sa.Column("col", sa.Integer, nullable=False),
        sa.Column("latitude", sa.Float, nullable=False),
        sa.Column("longitude", sa.Float, nullable=False),
        sa.Column("location_coordinate", sa.String(40), nullable=False),
        sa.Column("task_id", sa.String(64), nullable=True),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("rank", sa.Integer, nullable=True),
        sa.Column("competitors", Json, nullable=True),
        sa.Column("cost", sa.Numeric(14, 6), nullable=True),
        sa.Column("error_message", sa.Text, nullable=True),
        sa.Column("fetch_attempts", sa.Integer, nullable=False),
        sa.Column("fetched_at", UTCDateTime, nullable=True),
        sa.UniqueConstraint("geogrid_id", "row", "col", name="uq_rt_geogrid_cells_geogrid_id"),
    )
    op.create_index("ix_rt_geogrid_cells_task", "rt_geogrid_cells", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_rt_geogrid_cells_task", table_name="rt_geogrid_cells")
    op.drop_table("rt_geogrid_cells")
    op.drop_index("ix_rt_geogrids_status", table_name="rt_geogrids")
    op.drop_index("ix_rt_geogrids_workspace", table_name="rt_geogrids")
    op.drop_table("rt_geogrids")
