"""A table of its own for the claim primitive's tests (created by the test, not by migrations):
items to claim, and a record of each time one was worked on (no unique key, so a duplicate shows)."""

from __future__ import annotations

from sqlalchemy import Column, Integer, MetaData, String, Table, text

from app.db.types import UTCDateTime
from app.scheduling.claim import Claim

metadata = MetaData()

items = Table(
    "claim_test_items",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("status", String(16), nullable=False),
    Column("due_at", UTCDateTime, nullable=False),
    Column("lease_owner", String(100), nullable=True),
    Column("lease_until", UTCDateTime, nullable=True),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
)

worked = Table(
    "claim_test_worked",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("item_id", Integer, nullable=False),
    Column("owner", String(100), nullable=False),
)

ITEMS = Claim(
    table=items,
    due="status = 'pending' AND due_at <= :now AND (lease_until IS NULL OR lease_until < :now)",
    order_by="due_at, id",
    returning=("id", "attempts"),
    owner="lease_owner",
    expires="lease_until",
    sets={"attempts": "attempts + 1"},
    held="status = 'pending'",
)
