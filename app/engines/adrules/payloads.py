"""The job the dispatcher fans out, one per ad account (spec AR-13): everything the worker needs to
evaluate a rule on that account without reading the rule again.

The access token travels encrypted with the process's secret box: the queue (a database table or
Redis) never holds it in clear, and a payload printed in a log shows ciphertext only.
"""

from __future__ import annotations

from datetime import datetime

from app.engines.adrules.schemas import RuleDocument
from app.platform.crypto import SecretBox
from app.scheduling.jobs import JobPayload

RUN_ACCOUNT_JOB = "adrules.run_account"
"""Stable job name of the per-account evaluation (the worker side registers its handler)."""


class CampaignEntity(JobPayload, frozen=True, kw_only=True):
    """One campaign as the dispatcher fetched it. Budgets are integer minor units."""

    id: str
    name: str
    effective_status: str
    daily_budget: int | None = None
    lifetime_budget: int | None = None
    created_time: datetime | None = None


class AccountRef(JobPayload, frozen=True, kw_only=True):
    """The ad account a job runs on."""

    id: int
    """Our id (``adrules_ad_accounts.id``)."""
    meta_id: str
    """``act_<id>``."""
    currency: str
    timezone_name: str


class RunAccountPayload(JobPayload, frozen=True, kw_only=True):
    """Evaluate ``rule`` on ``entities`` of ``account``; results go to batch record
    ``batch_record_id`` (one dispatch shares ``batch_id`` across its accounts)."""

    batch_id: str
    batch_record_id: int
    workspace_id: int
    rule: RuleDocument
    account: AccountRef
    entities: list[CampaignEntity]
    access_token_encrypted: str
    """The workspace's Meta token, encrypted with :class:`~app.platform.crypto.SecretBox`."""
    dispatched_at: datetime
    """The sweep tick that created the job."""
    deferrals: int = 0
    """How many times the run was put back on the queue because Meta throttled the account."""

    def access_token(self, box: SecretBox) -> str:
        return box.decrypt(self.access_token_encrypted.encode())

    def __repr__(self) -> str:
        return (
            f"RunAccountPayload(batch_id={self.batch_id!r}, rule={self.rule.id}, "
            f"account={self.account.meta_id!r}, entities={len(self.entities)})"
        )


def seal_token(box: SecretBox, token: str) -> str:
    """Encrypt ``token`` for a payload."""
    return box.encrypt(token).decode()


def evaluation_zone(payload: RunAccountPayload) -> str:
    """The zone a run evaluates in (spec AR-23a): the one the rule names, else the ad account's
    own (Meta's ``timezone_name``, the zone its Insights day and budget day follow)."""
    return payload.rule.timezone or payload.account.timezone_name or "UTC"
