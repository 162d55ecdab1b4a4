"""Per-workspace provider configuration of the outside actions.

Each kind of action (``sms``, ``push``, ``letter``, ``payments``, ``booking``, ``ai``, ``http``)
has at most one provider per workspace: an API shape, a base URL, typed non-secret options, and
one credential stored as the workspace secret ``funnels.<kind>.key`` (encrypted at rest, never
returned). Options are msgspec structs per kind, so a bad value is refused naming its field.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

import msgspec

from app.db.dialect import row_count
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_delete, scoped_select
from app.engines.funnels.contacts.channel_fields import PUSH_TOKEN_FIELD
from app.engines.funnels.outside.models import ProviderConfig
from app.errors import NotFound, ValidationFailed
from app.integrations.http_guard import AddressGuard, OutboundError
from app.platform.crypto import SecretBox
from app.platform.service import delete_secret, get_secret, secret_names, set_secret


class SmsOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    sender: str | None = None
    """Default sender number or id (Twilio: ``from_number``)."""
    account_sid: str | None = None
    """Twilio only: the account the auth token (the secret) belongs to."""
    messaging_service_sid: str | None = None
    status_callback: str | None = None


class PushOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    token_field: str = PUSH_TOKEN_FIELD
    """The contact's custom field holding their device token."""


class LetterOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    color: bool = False


class PaymentsOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    success_url: str | None = None
    """With a success URL a hosted Checkout page is created (the run gets its URL); without
    one, a PaymentIntent (the run gets its id and client secret)."""
    cancel_url: str | None = None


class BookingOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    window_days: Annotated[int, msgspec.Meta(ge=1, le=365)] = 14
    """``book_slot`` takes the first free slot from the node's run time to this many days on."""


class AiOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    model: str = "gpt-4o-mini"
    max_tokens: Annotated[int, msgspec.Meta(ge=1, le=8192)] = 300
    system: str | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None


class HttpOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=60)] = 10.0
    """The whole exchange, redirects and body included."""
    max_response_bytes: Annotated[int, msgspec.Meta(ge=1, le=5_000_000)] = 262_144


OPTIONS: dict[str, type[Any]] = {
    "sms": SmsOptions,
    "push": PushOptions,
    "letter": LetterOptions,
    "payments": PaymentsOptions,
    "booking": BookingOptions,
    "ai": AiOptions,
    "http": HttpOptions,
}
SHAPES: dict[str, tuple[str, ...]] = {
    "sms": ("json", "twilio"),
    "push": ("json",),
    "letter": ("json",),
    "payments": ("stripe",),
    "booking": ("json",),
    "ai": ("openai",),
    "http": ("guarded",),
}
KINDS = tuple(SHAPES)
NEEDS_SECRET = frozenset(KINDS) - {"http"}


def secret_name(kind: str) -> str:
    return f"funnels.{kind}.key"


@dataclass(frozen=True, slots=True)
class Provider:
    """A provider as the senders use it: configuration plus the decrypted credential."""

    workspace_id: int
    kind: str
    shape: str
    base_url: str
    options: Any
    secret: str | None
    updated_at: datetime

    def fingerprint(self) -> str:
        """Changes whenever what a client is built from changes (cache key of the client)."""
        return f"{self.workspace_id}:{self.kind}:{self.updated_at.isoformat()}"


def parse_options(kind: str, raw: dict[str, Any] | None) -> Any:
    try:
        return msgspec.convert(raw or {}, type=OPTIONS[kind])
    except msgspec.ValidationError as exc:
        raise ValidationFailed.field("options", str(exc)) from exc


def check(kind: str, shape: str, base_url: str, options: Any) -> None:
    if kind not in SHAPES:
        raise NotFound(f"no provider kind '{kind}'; one of {', '.join(KINDS)}")
    if shape not in SHAPES[kind]:
        raise ValidationFailed.field("shape", f"one of {', '.join(SHAPES[kind])}")
    if kind != "http" and not base_url.startswith(("http://", "https://")):
        raise ValidationFailed.field("base_url", "an http(s) URL")
    if isinstance(options, SmsOptions) and shape == "twilio":
        if not options.account_sid:
            raise ValidationFailed.field("options.account_sid", "required for Twilio")
        if not options.sender and not options.messaging_service_sid:
            raise ValidationFailed.field(
                "options.sender", "Twilio needs a sender or a messaging_service_sid"
            )


async def check_targets(guard: AddressGuard, kind: str, base_url: str, options: Any) -> None:
    """Refuse a base URL or a callback URL that points inside the network (checked again at
    every connection)."""
    targets: list[tuple[str, str | None]] = [("base_url", base_url if kind != "http" else None)]
    if isinstance(options, SmsOptions):
        targets.append(("options.status_callback", options.status_callback))
    for field_name, url in targets:
        if not url:
            continue
        try:
            await guard.check_url(url, provider=kind)
        except OutboundError as exc:
            raise ValidationFailed.field(field_name, exc.message) from exc


async def configure(
    session: WriteSession,
    box: SecretBox,
    guard: AddressGuard,
    *,
    workspace_id: int,
    kind: str,
    shape: str,
    base_url: str,
    options: dict[str, Any] | None,
    secret: str | None,
    now: datetime,
) -> ProviderConfig:
    """Create or replace the workspace's provider for ``kind``; ``secret`` ``None`` keeps the
    stored credential (a provider that needs one must have one)."""
    parsed = parse_options(kind, options) if kind in OPTIONS else None
    check(kind, shape, base_url, parsed)
    await check_targets(guard, kind, base_url, parsed)
    if secret is not None:
        if not secret.strip():
            raise ValidationFailed.field("secret", "must not be empty")
        await set_secret(
            session, box, workspace_id=workspace_id, name=secret_name(kind), value=secret, now=now
        )
    elif kind in NEEDS_SECRET and secret_name(kind) not in await secret_names(
        session, workspace_id
    ):
        raise ValidationFailed.field("secret", f"the {kind} provider needs a credential")
    row = await session.scalar(
        scoped_select(ProviderConfig, workspace_id).where(ProviderConfig.kind == kind)
    )
    if row is None:
        row = ProviderConfig(workspace_id=workspace_id, kind=kind)
        session.add(row)
    row.shape = shape
    row.base_url = base_url.rstrip("/")
    row.options = msgspec.to_builtins(parsed)
    row.updated_at = now
    await session.flush()
    return row


async def remove(session: WriteSession, *, workspace_id: int, kind: str, now: datetime) -> None:
    result = await session.execute(
        scoped_delete(ProviderConfig, workspace_id).where(ProviderConfig.kind == kind)
    )
    if not row_count(result):
        raise NotFound(f"no {kind} provider is configured")
    if secret_name(kind) in await secret_names(session, workspace_id):
        await delete_secret(session, workspace_id=workspace_id, name=secret_name(kind), now=now)


async def list_configs(
    session: ReadSession, workspace_id: int
) -> list[tuple[ProviderConfig, bool]]:
    """Every configured provider of the workspace, with whether its credential is stored."""
    stored = set(await secret_names(session, workspace_id))
    rows = await session.scalars(
        scoped_select(ProviderConfig, workspace_id).order_by(ProviderConfig.kind)
    )
    return [(row, secret_name(row.kind) in stored) for row in rows]


async def load(
    session: ReadSession, box: SecretBox, workspace_id: int, kind: str
) -> Provider | None:
    row = await session.scalar(
        scoped_select(ProviderConfig, workspace_id).where(ProviderConfig.kind == kind)
    )
    if row is None:
        return None
    secret = await get_secret(session, box, workspace_id=workspace_id, name=secret_name(kind))
    return Provider(
        workspace_id=workspace_id,
        kind=kind,
        shape=row.shape,
        base_url=row.base_url,
        options=msgspec.convert(row.options or {}, type=OPTIONS[kind]),
        secret=secret,
        updated_at=row.updated_at,
    )


async def http_options(session: ReadSession, workspace_id: int) -> HttpOptions:
    """The workspace's ``http_request`` limits (defaults when it configured none)."""
    raw = await session.scalar(
        scoped_select(ProviderConfig, workspace_id, ProviderConfig.options).where(
            ProviderConfig.kind == "http"
        )
    )
    result: HttpOptions = msgspec.convert(raw or {}, type=HttpOptions)
    return result


async def push_token_field(session: ReadSession | WriteSession, workspace_id: int) -> str:
    """The contact field the workspace's push provider reads device tokens from (the default
    when no push provider is configured yet)."""
    raw = await session.scalar(
        scoped_select(ProviderConfig, workspace_id, ProviderConfig.options).where(
            ProviderConfig.kind == "push"
        )
    )
    options: PushOptions = msgspec.convert(raw or {}, type=PushOptions)
    return options.token_field
