"""Why a funnel could not be drafted (mapped to HTTP by the web layer like every domain error).
In each case nothing was written: no funnel, no draft record."""

from __future__ import annotations

from app.errors import Conflict, DomainError


class AiProviderMissing(Conflict):
    code = "ai_provider_missing"


class AiQuotaSpent(DomainError):
    """The organisation's monthly AI quota does not cover the request."""

    status = 429
    code = "ai_quota_exhausted"


class AiDraftFailed(DomainError):
    """The provider failed (timeout, error, an answer that is not a definition)."""

    status = 502
    code = "ai_draft_failed"
