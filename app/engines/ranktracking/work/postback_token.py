"""The address the provider posts a finished task back to, and the token that authenticates it.

The token names one child run and carries an HMAC-SHA256 of that run id under the workspace's
webhook secret (encrypted at rest, never sent anywhere), so it cannot be guessed or moved to another
run, and rotating the workspace secret invalidates every outstanding postback address (polling,
which always stays on, then collects those tasks).
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from app.db.session import ReadSession
from app.engines.ranktracking.models import Run
from app.platform.crypto import SecretBox
from app.platform.models import Workspace
from app.platform.service import webhook_secret

ROUTE_PREFIX = "/hooks/ranktracking/postback/"
_PURPOSE = b"ranktracking.postback:"


def sign(secret: str, run_id: int) -> str:
    """The postback token of ``run_id``: ``<run id>.<signature>``."""
    digest = hmac.new(secret.encode(), _PURPOSE + str(run_id).encode(), hashlib.sha256).digest()
    return f"{run_id}.{base64.urlsafe_b64encode(digest).rstrip(b'=').decode()}"


def run_id_of(token: str) -> int | None:
    """The run a token claims to be for (unverified), or None when it is not shaped like one."""
    head, dot, _ = token.partition(".")
    if not dot or not head.isdigit() or len(head) > 18:
        return None
    return int(head)


def matches(secret: str, token: str) -> bool:
    run_id = run_id_of(token)
    return run_id is not None and hmac.compare_digest(sign(secret, run_id), token)


async def workspace_secret(session: ReadSession, box: SecretBox, workspace_id: int) -> str | None:
    workspace = await session.get(Workspace, workspace_id)
    return webhook_secret(box, workspace) if workspace is not None else None


async def postback_url(
    session: ReadSession, box: SecretBox, public_url: str, run: Run
) -> str | None:
    """The postback address of ``run`` under ``public_url``."""
    secret = await workspace_secret(session, box, run.workspace_id)
    if secret is None:
        return None
    return f"{public_url.rstrip('/')}{ROUTE_PREFIX}{sign(secret, run.id)}"
