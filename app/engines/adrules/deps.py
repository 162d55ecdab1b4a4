"""What every ad-rules stage needs from the process, in one typed set.

The composition root builds one :class:`AdRulesDeps` per process from the settings
(:func:`app.wiring.adrules_deps`, registered with the runtime's resources); the sweep, the account
job and the web layer read that one (``resources.require(AdRulesDeps)``), so the Graph client, the
Sheets client, the sheet cache and the webhook client are shared and closed at exit. Tests and
benchmarks build it directly, or replace a field of the process's own.

The claim stage reads Meta through :meth:`AdRulesDeps.reader` only; this module imports no writer
(the dispatcher cannot change an ad, spec AR-19).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.clock import Clock
from app.db.session import Database, UnitOfWork
from app.engines.adrules.claim.pool import FETCH_OUTSTANDING
from app.engines.adrules.payloads import RunAccountPayload
from app.engines.adrules.stops import StopCheck
from app.engines.adrules.work.batched import BatchStats
from app.engines.adrules.work.insights import ITEM_RETRY_DELAYS, MAX_THROTTLE_WAIT_SECONDS
from app.engines.adrules.work.insights_shapes import Sleep
from app.engines.adrules.work.sheets_values import COPY_MAX_AGE, SheetCache
from app.integrations.http_guard import GuardedHttp
from app.integrations.mail import MailSender
from app.integrations.meta.client import GraphClient
from app.integrations.meta.login import MetaLogin
from app.integrations.meta.reader import MAX_BATCH, PAGE_SIZE, MetaReader
from app.integrations.meta.retry import RETRY_DELAYS
from app.integrations.sheets import SheetsClient, TokenMinter
from app.platform.crypto import SecretBox
from app.scheduling.jobs import JobSpec
from app.scheduling.queue import JobQueue

Defer = Callable[[UnitOfWork, RunAccountPayload, datetime], Awaitable[None]]
"""Queue ``payload`` again, to run at ``datetime``, in the unit of work given."""


def _never() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class AdRulesDeps:
    # -- the process
    db: Database
    queue: JobQueue
    clock: Clock
    secrets: SecretBox
    sleep: Sleep
    """Waits between attempts (the clock's sleep: manual time in tests)."""
    # -- outside clients, one each per process
    graph: GraphClient
    sheets: SheetsClient
    sheet_cache: SheetCache
    job: JobSpec[RunAccountPayload]
    """The account job the dispatch queues: handed in, since its handler executes actions and
    the claim stage must not import it (AR-19)."""
    token_minter: TokenMinter | None = None
    """Mints Sheets access tokens from a workspace's service-account key."""
    mail: MailSender | None = None
    webhook_http: GuardedHttp | None = None
    """The client of ``notify_webhook`` actions (the address guard applies)."""
    public_url: str = ""
    """The server's public address, for the links in run digests (the run, the approval page)."""
    login: MetaLogin | None = None
    """Facebook Login and the token check (spec AR-29, AR-30), over ``graph``; None when the
    operator set no Meta app."""
    # -- the platform stop (spec AR-23)
    stopped: Callable[[], bool] = _never
    """The installation-wide switch (``PLATFORM_STOP``), asked by each sweep."""
    stop: StopCheck | None = None
    """All three switches, asked at the start of a run and before every write and notification;
    None: never stopped (unit tests of other behaviour)."""
    # -- claim: the dispatch sweep
    claim_batch: int = 500
    fetch_concurrency: int = 16
    page_size: int = PAGE_SIZE
    fetch_retry_delays: tuple[float, ...] = RETRY_DELAYS
    fetch_deadline_seconds: float = 8.0
    """One account's whole campaign fetch (pages and retries) must end within this, counted from
    its first HTTP call, so a hanging ad account is recorded as skipped and the sweep goes on."""
    fetch_slot_seconds: float = 0.5
    """A call out longer than this gives its concurrency slot to the next account (and runs on
    to its deadline): hanging accounts cannot keep the others waiting."""
    fetch_outstanding: int = FETCH_OUTSTANDING
    """Calls out at once in all, slow ones included."""
    tick_budget_seconds: float | None = 8.5
    """The dispatch tick's whole claim phase ends within this: accounts not reached, or still
    arriving, are deferred to the next tick, which takes them first. None: no budget."""
    # -- work: the account job and the preview
    insights_mode: str = "packed"
    item_retry_delays: tuple[float, ...] = ITEM_RETRY_DELAYS
    preview_retry_delays: tuple[float, ...] = (1.0, 2.0)
    concurrency: int = 16
    throttle_max_wait_seconds: float = MAX_THROTTLE_WAIT_SECONDS
    """Meta's throttling estimates up to this long are waited out inside the run."""
    defer: Defer | None = None
    """Puts the run back on the queue for later (a longer throttle); None: record errors."""
    max_deferrals: int = 3
    write_batch_size: int = MAX_BATCH
    """Objects per batch call of the live re-reads and of the writes (≤ 50; 1 sends each
    object's re-read and write in a call of its own, the per-object baseline)."""
    write_stats: BatchStats | None = None
    """Counts the batch calls of re-reads and writes (benchmarks and tests)."""
    budget_changes_per_hour: int = 4
    """Budget changes allowed per object per hour across all rules (Meta's limit is ~4)."""
    sheet_copy_max_age: timedelta = COPY_MAX_AGE
    """The oldest database copy of a sheet a custom metric may fall back on."""
    lease: Callable[[], Awaitable[None]] | None = None
    """Raises :class:`~app.scheduling.claim.LeaseLost` once the job's lease expired or another
    worker took the job over; asked at the start of a run and before every write and
    notification, so a run that lost its job leaves the rest to the attempt that holds it.
    Set per job attempt; None: no lease (direct calls)."""

    def reader(self, token: str) -> MetaReader:
        """A read-only Graph client for an access token."""
        return MetaReader(self.graph, token)

    async def aclose(self) -> None:
        """Close the outside clients (the process's resources do at exit)."""
        await self.graph.aclose()
        await self.sheets.aclose()
        if self.token_minter is not None:
            await self.token_minter.aclose()
        if self.webhook_http is not None:
            await self.webhook_http.aclose()
