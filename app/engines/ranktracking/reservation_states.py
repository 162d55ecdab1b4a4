"""The states of a run's reservation (``rt_runs.reservation_state``) and the moves between them.

The ledger itself is never updated; the run says where its reservation stands: ``none`` (nothing
reserved), ``held`` (reserved against the organisation's balance), then ``settled`` (charged for
what came back) or ``released`` (given back whole). :mod:`app.engines.ranktracking.ledger` is
the only writer of the moves out of ``held``."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

ReservationState = Literal["none", "held", "settled", "released"]
RESERVATION_STATES: tuple[ReservationState, ...] = literal_states(ReservationState)

RES_NONE: Final = "none"
RES_HELD: Final = "held"
RES_SETTLED: Final = "settled"
RES_RELEASED: Final = "released"

RESERVATIONS = StateMachine(
    table="rt_runs",
    column="reservation_state",
    title="Rank-tracking reservation",
    states=RESERVATION_STATES,
    initial=(RES_NONE, RES_HELD),
    transitions={RES_NONE: (RES_HELD,), RES_HELD: (RES_SETTLED, RES_RELEASED)},
)
