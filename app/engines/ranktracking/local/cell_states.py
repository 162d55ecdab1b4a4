"""The states of one point of a geo-grid scan (``rt_geogrid_cells.state``) and the moves
between them: ``new`` until its task is posted (``posted``), then read — ``found`` (the business
is among the listings) or ``absent`` (it is not in the top N) — or ``failed`` (the provider
refused the task or never delivered it; not charged)."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

CellState = Literal["new", "posted", "found", "absent", "failed"]
CELL_STATES: tuple[CellState, ...] = literal_states(CellState)

CELL_NEW: Final = "new"
CELL_POSTED: Final = "posted"
CELL_FOUND: Final = "found"
CELL_ABSENT: Final = "absent"
"""Read, and the business is not among the listings (not in the top N)."""
CELL_FAILED: Final = "failed"
"""The provider refused the task or never delivered it; not charged."""

CELLS = StateMachine(
    table="rt_geogrid_cells",
    column="state",
    title="Geo-grid cell",
    states=CELL_STATES,
    initial=(CELL_NEW,),
    transitions={
        CELL_NEW: (CELL_POSTED, CELL_FAILED),
        CELL_POSTED: (CELL_FOUND, CELL_ABSENT, CELL_FAILED),
    },
)
