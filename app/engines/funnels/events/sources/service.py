"""Creating, listing, rotating and deleting a workspace's webhook sources (services never
commit: the caller holds the unit of work).

Which secret a source verifies with depends on its provider:

| provider | receives | secret |
|---|---|---|
| ``stripe`` | ``payment`` | the endpoint's signing secret from Stripe (``whsec_…``), pasted in |
| ``calcom`` | ``booking`` | the secret typed into Cal.com's webhook form, pasted in — or generated here and pasted there |
| ``sweepline`` | ``payment`` or ``booking`` | generated here (``swsec_…``) |

A generated secret is returned once, by the create or rotate call that made it; a pasted one is
never returned. Both are kept encrypted with the instance key, like every workspace secret.
Rotation replaces the secret at once (Stripe signs with the old and the new secret while an
endpoint's secret is rolled, so paste the new one as soon as Stripe shows it).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from app.db.dialect import row_count
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_delete, scoped_select
from app.engines.funnels.events.sources.models import WebhookSource
from app.errors import Conflict, NotFound, ValidationFailed
from app.platform.crypto import SecretBox

PROVIDERS: dict[str, tuple[str, ...]] = {
    "stripe": ("payment",),
    "calcom": ("booking",),
    "sweepline": ("payment", "booking"),
}
"""Provider → what its events can feed."""
PASTED = frozenset({"stripe"})
"""Providers that make the secret themselves: it must be given."""
GENERATED = frozenset({"sweepline"})
"""Providers whose secret only we make."""
MAX_SOURCES = 100
_STRIPE_SECRET = re.compile(r"^whsec_[A-Za-z0-9+/=_-]{8,200}$")


@dataclass(frozen=True, slots=True)
class Created:
    source: WebhookSource
    secret: str | None
    """The generated secret, shown this once; ``None`` when it was given."""


def _secret_for(provider: str, given: str | None) -> tuple[str, bool]:
    """The secret to store and whether it was generated here."""
    given = given.strip() if given else None
    if provider in GENERATED:
        if given:
            raise ValidationFailed.field("secret", "this provider's secret is generated for you")
        return f"swsec_{secrets.token_urlsafe(32)}", True
    if given is None:
        if provider in PASTED:
            raise ValidationFailed.field(
                "secret", "paste the endpoint's signing secret (whsec_…) from Stripe"
            )
        return secrets.token_urlsafe(32), True
    if provider == "stripe" and not _STRIPE_SECRET.match(given):
        raise ValidationFailed.field("secret", "a Stripe signing secret starts with whsec_")
    if not 16 <= len(given) <= 500 or not given.isprintable():
        raise ValidationFailed.field("secret", "16 to 500 printable characters")
    return given, False


async def create_source(
    session: WriteSession,
    box: SecretBox,
    *,
    workspace_id: int,
    name: str,
    provider: str,
    receives: str | None,
    secret: str | None,
    now: datetime,
) -> Created:
    name = name.strip()
    if not name:
        raise ValidationFailed.field("name", "must not be empty")
    if provider not in PROVIDERS:
        raise ValidationFailed.field("provider", f"one of {', '.join(PROVIDERS)}")
    allowed = PROVIDERS[provider]
    receives = receives or allowed[0]
    if receives not in allowed:
        raise ValidationFailed.field(
            "receives", f"{provider} sends {' or '.join(allowed)} events only"
        )
    value, generated = _secret_for(provider, secret)
    existing = await session.scalar(
        scoped_select(WebhookSource, workspace_id, func.count()).select_from(WebhookSource)
    )
    if (existing or 0) >= MAX_SOURCES:
        raise ValidationFailed.field("name", f"a workspace has at most {MAX_SOURCES} sources")
    if await session.scalar(
        scoped_select(WebhookSource, workspace_id, WebhookSource.id).where(
            WebhookSource.name == name
        )
    ):
        raise Conflict(f"a source named '{name}' exists already")
    source = WebhookSource(
        workspace_id=workspace_id,
        public_id=f"src_{secrets.token_urlsafe(18)}",
        name=name,
        provider=provider,
        receives=receives,
        secret_ciphertext=box.encrypt(value),
        created_at=now,
        secret_rotated_at=now,
    )
    session.add(source)
    await session.flush()
    return Created(source, value if generated else None)


async def list_sources(session: ReadSession, workspace_id: int) -> list[WebhookSource]:
    return list(
        await session.scalars(scoped_select(WebhookSource, workspace_id).order_by(WebhookSource.id))
    )


async def get_source(session: ReadSession, workspace_id: int, source_id: int) -> WebhookSource:
    source = await session.scalar(
        scoped_select(WebhookSource, workspace_id).where(WebhookSource.id == source_id)
    )
    if source is None:
        raise NotFound(f"webhook source {source_id} not found")
    return source


async def rotate_secret(
    session: WriteSession,
    box: SecretBox,
    *,
    workspace_id: int,
    source_id: int,
    secret: str | None,
    now: datetime,
) -> Created:
    """Replace the source's secret; requests signed with the old one are refused from now on."""
    source = await get_source(session, workspace_id, source_id)
    value, generated = _secret_for(source.provider, secret)
    source.secret_ciphertext = box.encrypt(value)
    source.secret_rotated_at = now
    await session.flush()
    return Created(source, value if generated else None)


async def delete_source(session: WriteSession, workspace_id: int, source_id: int) -> None:
    result = await session.execute(
        scoped_delete(WebhookSource, workspace_id).where(WebhookSource.id == source_id)
    )
    if not row_count(result):
        raise NotFound(f"webhook source {source_id} not found")


@dataclass(frozen=True, slots=True)
class Verifier:
    """What a receiver needs of a source: its workspace, provider, feed and secret."""

    workspace_id: int
    source_id: int
    provider: str
    receives: str
    secret: str


async def verifier(session: ReadSession, box: SecretBox, public_id: str) -> Verifier | None:
    source = await session.scalar(select(WebhookSource).where(WebhookSource.public_id == public_id))
    if source is None:
        return None
    return Verifier(
        source.workspace_id,
        source.id,
        source.provider,
        source.receives,
        box.decrypt(source.secret_ciphertext),
    )
