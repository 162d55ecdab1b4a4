"""Ad rules domain errors (mapped to HTTP in one place, ``app.web.errors``)."""

from __future__ import annotations

from app.errors import Conflict, DomainError, NotFound, ValidationFailed
from app.integrations.meta.errors import MetaError


class RuleNotFound(NotFound):
    code = "rule_not_found"


class TaskNotFound(NotFound):
    code = "task_not_found"


class AccountNotFound(NotFound):
    code = "ad_account_not_found"


class MetaTokenMissing(Conflict):
    """The workspace has no Meta access token yet."""

    code = "meta_token_missing"


class MetaUnavailable(DomainError):
    """The Graph API refused or failed a call made on a person's request."""

    status = 502
    code = "meta_error"


class MetaTokenRejected(ValidationFailed):
    """Meta refused the workspace's access token itself (OAuth error 190: invalid, expired or
    revoked): the workspace must set a new token, nothing on Meta's side is failing."""

    code = "meta_token_rejected"


OAUTH_ERROR = 190


def meta_refusal(what: str, error: MetaError) -> DomainError:
    """The answer to a person's request that Meta refused: 422 when the token is the problem,
    502 when Meta failed."""
    message = f"{what}: {error.describe()}"
    if error.code == OAUTH_ERROR:
        return MetaTokenRejected(message)
    return MetaUnavailable(message)
