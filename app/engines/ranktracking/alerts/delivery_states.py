"""The states of an alert e-mail (``rt_alert_deliveries.state``) and of a report e-mail
(``rt_report_deliveries.state``), and the moves between them.

Both are written ``pending`` and end ``sent`` or ``failed``; a transient failure leaves them
``pending`` for the queue's retry. An alert is claimed ``sending`` under a lease first (past
the lease another attempt may take it over); a report is settled straight from ``pending``."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

DeliveryState = Literal["pending", "sending", "sent", "failed"]
DELIVERY_STATES: tuple[DeliveryState, ...] = literal_states(DeliveryState)
ReportDeliveryState = Literal["pending", "sent", "failed"]

DELIVERY_PENDING: Final = "pending"
DELIVERY_SENDING: Final = "sending"
DELIVERY_SENT: Final = "sent"
DELIVERY_FAILED: Final = "failed"

ALERT_DELIVERIES = StateMachine(
    table="rt_alert_deliveries",
    column="state",
    title="Rank-tracking alert e-mail",
    states=DELIVERY_STATES,
    initial=(DELIVERY_PENDING,),
    transitions={
        DELIVERY_PENDING: (DELIVERY_SENDING,),
        DELIVERY_SENDING: (DELIVERY_SENT, DELIVERY_FAILED, DELIVERY_PENDING, DELIVERY_SENDING),
    },
    notes={DELIVERY_SENDING: "leased; past the lease another attempt takes it over"},
)

REPORT_DELIVERIES = StateMachine(
    table="rt_report_deliveries",
    column="state",
    title="Rank-tracking report e-mail",
    states=literal_states(ReportDeliveryState),
    initial=(DELIVERY_PENDING,),
    transitions={DELIVERY_PENDING: (DELIVERY_SENT, DELIVERY_FAILED)},
)
