"""What the deliverer's channels are built from: the process's parts, handed once to each
channel's factory (the plugin's ``CHANNELS`` table) when the engine's dependencies are built
(:func:`app.wiring.funnels_deps`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.clock import Clock
from app.db.session import Database
from app.engines.funnels.outbox.channel import ChannelSender
from app.engines.funnels.outbox.work.email import EmailChannel, MailTransport
from app.engines.funnels.outbox.work.mail_tracking import WorkspaceTracking
from app.engines.funnels.outside.clients import ProviderClients
from app.integrations.http_guard import AddressGuard
from app.integrations.mail import SmtpPool
from app.platform.crypto import SecretBox
from app.settings import MailSettings


@dataclass(frozen=True, slots=True)
class ChannelDeps:
    db: Database
    secrets: SecretBox
    clock: Clock
    mail: MailSettings
    guard: AddressGuard
    """Where provider base URLs and ``http_request`` may connect (the process's one guard)."""
    clients: ProviderClients
    """The outside channels' provider clients, one per workspace credential."""
    smtp: SmtpPool
    """The ``email`` channel's SMTP connections (the process's pool, shared by its deliverer
    jobs)."""
    team_mail: MailTransport
    """``notify_team``'s sender (one SMTP conversation per message)."""
    tracking: WorkspaceTracking | None
    """Signs funnel mail's unsubscribe links and tracking with each workspace's secret."""


ChannelFactory = Callable[[ChannelDeps], ChannelSender]
"""Builds a channel's sender from the process's parts (once per process)."""


def email_channel(deps: ChannelDeps) -> EmailChannel:
    """The ``email`` channel's sender, over the process's SMTP pool."""
    return EmailChannel(
        deps.smtp,
        tracking=deps.tracking,
        signing=deps.tracking,
        mailto_address=deps.mail.unsubscribe_mailbox,
    )
