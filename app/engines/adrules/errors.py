"""Ad rules domain errors (mapped to HTTP in one place, ``app.web.errors``)."""

from __future__ import annotations

from app.errors import Conflict, DomainError, NotFound


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
