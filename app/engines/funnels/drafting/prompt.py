"""What a person asks for and the chat messages that ask a model for it (pure).

The person's choices of trigger, audience and channels are constraints, not suggestions: the
trigger and the audience are written into the draft as chosen whatever the model answered
(:func:`~app.engines.funnels.drafting.rounds.impose`), and a message on a channel that was not
allowed is a finding the model must repair. The description is passed as it was written, in any
language; the model is asked to write the messages in that language.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from app.engines.funnels.contacts.segments import Predicate
from app.engines.funnels.definitions.graph import Trigger
from app.engines.funnels.definitions.problems import KnownNames
from app.engines.funnels.definitions.validate import BUILTIN_VARIABLES
from app.integrations.ai import ChatMessage

Channel = Literal["email", "sms", "push", "letter"]
SEND_KIND_CHANNEL: dict[str, Channel] = {
    "send_email": "email",
    "send_sms": "sms",
    "send_push": "push",
    "send_letter": "letter",
}
CONSTRAINTS_LINE = "Constraints (JSON): "
"""Starts the line of the first user message that holds the person's choices as JSON."""


class DraftRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """A request to draft a funnel from a description (``POST /api/v1/funnels/ai-drafts``)."""

    description: Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]
    """The journey in the person's words, in any language."""
    name: Annotated[str, msgspec.Meta(max_length=200)] = ""
    """The new funnel's name (blank: the description's first words)."""
    trigger: Trigger
    """What starts a run: set on the draft as chosen."""
    audience: Predicate | None = None
    """Who may enter (the entry predicate): set on the draft as chosen."""
    channels: Annotated[list[Channel], msgspec.Meta(min_length=1, max_length=4)] = msgspec.field(
        default_factory=lambda: ["email"]
    )
    """The channels the funnel may message the contact on."""


def constraints(request: DraftRequest) -> dict[str, object]:
    return {
        "trigger": msgspec.to_builtins(request.trigger),
        "audience": msgspec.to_builtins(request.audience),
        "channels": list(request.channels),
    }


def system_message(known: KnownNames) -> ChatMessage:
    fields = sorted({*BUILTIN_VARIABLES, *known.fields})
    return ChatMessage(
        "system",
        "You design customer journeys (funnels) for Sweepline. Answer with exactly one funnel "
        "definition as JSON following the given schema. Rules the validator enforces: exactly "
        'one node has "entry": true; every node is reachable from it; every loop contains a '
        "wait; send_email needs a subject and a body, send_sms a text, send_push a title and a "
        "body, send_letter a body; merge variables are written {{name}} and only these exist: "
        f"{', '.join(fields)}; tags, lists and fields you reference must exist "
        f"(tags: {', '.join(sorted(known.tags)) or 'none'}; lists: "
        f"{', '.join(sorted(known.lists)) or 'none'}). Use only the channels listed in the "
        "constraints. Write the messages in the language of the description.",
    )


def first_messages(request: DraftRequest, known: KnownNames) -> list[ChatMessage]:
    chosen = msgspec.json.encode(constraints(request)).decode()
    return [
        system_message(known),
        ChatMessage("user", f"{request.description}\n\n{CONSTRAINTS_LINE}{chosen}"),
    ]


def repair_messages(answer: str, findings: list[str]) -> list[ChatMessage]:
    """The model's answer and the validator's own messages about it, asking for a correction."""
    listed = "\n".join(f"- {line}" for line in findings)
    return [
        ChatMessage("assistant", answer),
        ChatMessage(
            "user",
            "The validator refused this definition:\n"
            f"{listed}\n"
            "Answer with the whole corrected definition.",
        ),
    ]
