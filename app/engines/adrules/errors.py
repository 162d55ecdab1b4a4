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


class MetaTokenRefused(ValidationFailed):
    """A token about to be saved failed its check with Meta (``debug_token``): not valid, expired,
    issued for another app, or without the ads permissions. ``details`` name the ``token`` field
    and the reason (``token_invalid``, ``token_expired``, ``token_scope_missing``)."""

    code = "meta_token_refused"


class MetaLoginNotConfigured(Conflict):
    """The operator has not set the Meta app (``META_APP_ID``, ``META_APP_SECRET``): tokens cannot
    be checked and Facebook Login cannot start."""

    code = "meta_app_not_configured"


class LoginRefused(ValidationFailed):
    """The way back from Facebook Login does not hold: a ``state`` this session did not start
    (or already used, or too old), a code Meta refuses, or a person who cancelled."""

    code = "facebook_login_refused"
