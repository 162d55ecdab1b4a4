"""The states of a campaign (``campaigns.status``) and the moves between them.

A campaign is a ``draft`` until scheduled (``scheduled``; unscheduling makes it a draft again).
When it is due (or a draft is sent at once) its audience snapshot is taken
(``materialising``, in chunks for a large audience), then it is ``sending`` until every
recipient is settled (``done``). A person may cancel it at any point before it is done
(``cancelled``)."""

from __future__ import annotations

from typing import Final, Literal

from app.db.states import StateMachine, literal_states

CampaignStatus = Literal["draft", "scheduled", "materialising", "sending", "done", "cancelled"]
CAMPAIGN_STATUSES: tuple[CampaignStatus, ...] = literal_states(CampaignStatus)

DRAFT: Final = "draft"
SCHEDULED: Final = "scheduled"
MATERIALISING: Final = "materialising"
"""The audience snapshot is being taken (in chunks); sending starts when it is complete."""
SENDING: Final = "sending"
DONE: Final = "done"
CANCELLED: Final = "cancelled"
DUE_STATUSES: tuple[CampaignStatus, ...] = (SCHEDULED, SENDING)
"""The campaigns the due sweep looks at (the partial index ``ix_campaigns_due``)."""

CAMPAIGNS = StateMachine(
    table="campaigns",
    column="status",
    title="Campaign",
    states=CAMPAIGN_STATUSES,
    initial=(DRAFT,),
    transitions={
        # A draft's audience snapshotted at once: the API's ``POST …/audience`` (send it now).
        DRAFT: (SCHEDULED, MATERIALISING, CANCELLED),
        SCHEDULED: (DRAFT, MATERIALISING, CANCELLED),
        MATERIALISING: (SENDING, CANCELLED),
        SENDING: (DONE, CANCELLED),
    },
)
