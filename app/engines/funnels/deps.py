"""What the funnels engine needs from the process, in one typed set.

The composition root builds one :class:`FunnelsDeps` per process (:func:`app.wiring.funnels_deps`,
registered with the runtime's resources) over the plugin's registries; the runner's and the
deliverer's jobs and the web layer read that one (``resources.require(FunnelsDeps)``), so the
runner, the deliverer with its channels, the SMTP pool, the provider clients and the senders of
trial mail are built once and closed at exit. Tests build one or replace a field of the process's
own (``dataclasses.replace``).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.clock import Clock
from app.db.session import Database
from app.engines.funnels.outbox.channel_deps import ChannelDeps
from app.engines.funnels.outbox.deliver import Deliverer, MailTransport
from app.engines.funnels.runs.runner import Runner
from app.integrations.mail.sns import SnsVerifier
from app.platform.crypto import SecretBox
from app.scheduling.queue import JobQueue
from app.settings import Settings


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

    async def aclose(self) -> None:
        """Close the SMTP pool and the provider clients (the process's resources do at exit)."""
        await self.channels.clients.aclose()
        await self.channels.smtp.aclose()
