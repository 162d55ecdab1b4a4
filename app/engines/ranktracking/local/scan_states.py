"""The states of a geo-grid scan (``rt_geogrids.status``, RT-121..RT-127) and of its
reservation (``rt_geogrids.reservation_state``), and the moves between them.

A scan is created ``reserved`` (money held, nothing posted); one caller takes it ``posting``; it
is ``collecting`` once its tasks are out, or ``failed`` when nothing could be posted (its
reservation released). It ends ``done`` when every cell is read or given up and the money is
settled; a post never confirmed gives its cells up and ends the scan ``done`` from ``posting``.
Its reservation moves like a rank-tracking run's: ``none`` → ``held`` → ``settled`` or
``released``, once (a conditional update in :mod:`.money`)."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states
from app.engines.ranktracking.reservation_states import (
    RES_HELD,
    RES_NONE,
    RES_RELEASED,
    RES_SETTLED,
    RESERVATION_STATES,
)

ScanStatus = Literal["reserved", "posting", "collecting", "done", "failed"]
SCAN_STATUSES: tuple[ScanStatus, ...] = literal_states(ScanStatus)

RESERVED: Final = "reserved"
POSTING: Final = "posting"
COLLECTING: Final = "collecting"
DONE: Final = "done"
FAILED: Final = "failed"

SCANS = StateMachine(
    table="rt_geogrids",
    column="status",
    title="Geo-grid scan",
    states=SCAN_STATUSES,
    initial=(RESERVED,),
    transitions={
        RESERVED: (POSTING,),
        POSTING: (COLLECTING, FAILED, DONE),
        COLLECTING: (DONE,),
    },
)

SCAN_RESERVATIONS = StateMachine(
    table="rt_geogrids",
    column="reservation_state",
    title="Geo-grid scan reservation",
    states=RESERVATION_STATES,
    initial=(RES_NONE,),
    transitions={RES_NONE: (RES_HELD,), RES_HELD: (RES_SETTLED, RES_RELEASED)},
)
