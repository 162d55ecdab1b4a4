"""A funnel's settings, the part of its definition that applies to every run rather than to one
node: re-entry, the funnel's quiet hours, the topic its mail is about, whether it is
transactional, what a capped message does, and the holdout kept out to measure its lift.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec


class FunnelSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    reentry: bool = False
    """Let a contact enter again after their previous run ended."""
    reentry_days: Annotated[int, msgspec.Meta(ge=1, le=3650)] | None = None
    """With ``reentry``: at most once per this many days. A contact who entered the funnel (any
    version) less than this many days ago is not entered again."""
    quiet_start_hour: int | None = None
    quiet_end_hour: int | None = None
    """Quiet hours every message of the funnel honours (contact's time zone)."""
    topic: Annotated[str, msgspec.Meta(min_length=1, max_length=100)] = "marketing"
    """What the funnel's mail is about, as the preference page names it: a contact can leave
    one topic and keep the others."""
    transactional: bool = False
    """Mail the contact asked for (receipts, password resets, a booking's confirmation): sent
    without unsubscribe headers and despite marketing opt-outs (never after a bounce or a
    complaint), and not counted against the frequency cap."""
    when_capped: Literal["wait", "skip"] = "wait"
    """What a message of this funnel does when the workspace's frequency cap is reached for its
    contact: wait for the next allowed time (their next day or week), or be skipped."""
    holdout: Holdout | None = None
    """Keep a random control share of entrants out of the funnel (see :class:`Holdout`)."""


class Holdout(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A random control share of the funnel's entrants who get nothing: their run is recorded
    and ended at the door, so the report can measure the funnel's lift against them."""

    percent: Annotated[float, msgspec.Meta(gt=0, le=50)] = 10
    goal_event: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    """The contact event that counts as converting, for both groups alike."""
    window_days: Annotated[int, msgspec.Meta(ge=1, le=365)] = 30
