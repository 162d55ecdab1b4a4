"""What the funnels engine needs from the process, in one typed set.

The composition root builds one :class:`FunnelsDeps` per process (:func:`app.wiring.funnels_deps`,
registered with the runtime's resources) over the plugin's registries; the runner's and the
deliverer's jobs and the web layer read that one (``resources.require(FunnelsDeps)``), so the
runner, the deliverer with its channels, the SMTP pool, the provider clients and the senders of
trial mail are built once and closed at exit. Tests build one or replace a field of the process's
own (``dataclasses.replace``).

The public receivers' parts (the event writer, the ingest-job requests) are typed by what the
receivers call on them (:class:`EventStore`, :class:`IngestRequests`), not by their classes: the
ingest job queues the runner's job, whose handler reads these dependencies, so naming the
classes here — even for the type checker only — would make an import cycle
(``deps → events/ingest → jobs → deps``; an import contract keeps it out).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from app.clock import Clock
from app.db.session import Database
from app.engines.funnels.outbox.work.channel_deps import ChannelDeps
from app.engines.funnels.outbox.work.deliver import Deliverer
from app.engines.funnels.outbox.work.email import MailTransport
from app.engines.funnels.runs.work.runner import Runner
from app.integrations.mail.sns import SnsVerifier
from app.platform.crypto import SecretBox
from app.scheduling.queue import JobQueue
from app.settings import Settings
from app.ttl_cache import TtlCache


class EventStore(Protocol):
    """Stores an inbound event (``events/ingest_writer.py``'s group-commit writer)."""

    async def store(
        self,
        *,
        workspace_id: int,
        source: str,
        name: str,
        external_id: str | None,
        payload: Mapping[str, Any],
        now: datetime,
    ) -> int | None:
        """The stored event's id, or ``None`` when the sender's id was seen before."""
        ...

    async def aclose(self) -> None:
        """Write what is waiting (the process's exit)."""
        ...


class IngestRequests(Protocol):
    """Asks for stored events to be processed soon (``events/ingest.py``'s requests)."""

    async def request(self, now: datetime) -> None: ...


CACHE_SECONDS = 30.0
"""How long the public receivers reuse a resolved ingest token or a decrypted workspace secret
(a rotated token stops working within this time)."""


@dataclass(frozen=True, slots=True)
class FunnelsDeps:
    # -- the process
    db: Database
    queue: JobQueue
    clock: Clock
    secrets: SecretBox
    settings: Settings
    # -- the runs and the outbox
    runner: Runner
    """Executes due runs, over the plugin's node executors."""
    deliverer: Deliverer
    """Delivers due effects through the channels built from :attr:`channels`."""
    channels: ChannelDeps
    """What the deliverer's channels were built from (the SMTP pool, the provider clients)."""
    # -- the web layer's senders and verifiers
    trial_mail: MailTransport
    """Sends the editor's and the API's trial e-mails (one SMTP conversation each)."""
    sns: SnsVerifier
    """Verifies Amazon SNS deliveries of SES reports (its certificates cached)."""
    # -- the public receivers (app/web/hooks)
    event_writer: EventStore
    """The group-commit writer of inbound events."""
    processing: IngestRequests
    """Queues the ingest job after a request stored an event (at most twice a second)."""
    ingest_tokens: TtlCache[str, int]
    """Workspace by the SHA-256 of its ingest token."""
    workspace_secrets: TtlCache[int, str]
    """Each workspace's decrypted signing secret."""
    provider_secrets: TtlCache[tuple[int, str], str]
    """A workspace's mail-provider secrets (SES topics, Mailgun's signing key) by name."""

    async def aclose(self) -> None:
        """Write the inbound events still waiting, close the SMTP pool and the provider clients
        (the process's resources do at exit)."""
        await self.event_writer.aclose()
        await self.channels.clients.aclose()
        await self.channels.smtp.aclose()
