"""Ad rules public routes (under ``/hooks/``; authenticated by the signed token in the path).

- ``GET /hooks/adrules/approve/{token}``: the approval page a run's digest links to — what the
  run proposes and two buttons. A GET changes nothing: chat clients fetch links to preview them.
- ``POST /hooks/adrules/approve/{token}`` (approve) and ``…/reject``: the buttons. The token is
  signed with the workspace's secret and expires with the run's approval window (spec AR-28).
"""

from __future__ import annotations

from html import escape
from typing import Any

from litestar import MediaType, Response, get, post
from litestar.params import FromPath

from app.engines.adrules.approvals import decide
from app.engines.adrules.approvals.links import ApprovalClaims
from app.engines.adrules.approvals.queries import run_proposals, verify_link
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.notify_models import PROPOSAL_PENDING
from app.errors import Conflict
from app.platform.audit.origin import ANONYMOUS
from app.runtime import Runtime
from app.web.auth import CurrentRuntime

PREFIX = "/hooks/adrules/approve"
LINK_ACTOR = "approval link"
"""How the records and the audit log name a decision made through a digest's signed link."""


def _page(title: str, content: str, status: int = 200) -> Response[str]:
    html = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width'>"
        f"<meta name='robots' content='noindex'><title>{escape(title)}</title>"
        f"</head><body><main><h1>{escape(title)}</h1>{content}</main></body></html>"
    )
    return Response(
        html,
        media_type=MediaType.HTML,
        status_code=status,
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )


def _invalid() -> Response[str]:
    return _page(
        "Link not valid",
        "<p>This approval link is not valid or its approval window has ended. "
        "Open the run in the dashboard to see what happened.</p>",
        404,
    )


async def _claims(runtime: Runtime, token: str) -> ApprovalClaims | None:
    async with runtime.db.read() as session:
        return await verify_link(session, runtime.secrets, token, runtime.clock.now())


@get(f"{PREFIX}/{{token:str}}")
async def approval_page(runtime: CurrentRuntime, token: FromPath[str]) -> Response[str]:
    claims = await _claims(runtime, token)
    if claims is None:
        return _invalid()
    async with runtime.db.read() as session:
        proposals = await run_proposals(session, claims.workspace_id, claims.batch_id)
    pending = [p for p in proposals if p.status == PROPOSAL_PENDING]
    if not pending:
        return _page("Nothing to approve", "<p>Every change of this run has been decided.</p>")
    items = "".join(
        f"<li>{escape(p.campaign_name)} ({escape(p.campaign_id)}): {escape(p.action)} "
        f"{escape(str(p.before or ''))} → {escape(str(p.after or ''))}</li>"
        for p in pending[:200]
    )
    more = f"<p>and {len(pending) - 200} more.</p>" if len(pending) > 200 else ""
    action = f"{PREFIX}/{escape(token)}"
    return _page(
        "Approve these changes?",
        f"<p>{len(pending)} changes await approval until "
        f"{claims.expires_at:%Y-%m-%d %H:%M} UTC.</p><ul>{items}</ul>{more}"
        f"<form method='post' action='{action}'><button type='submit'>Approve and apply"
        f"</button></form><form method='post' action='{action}/reject'>"
        "<button type='submit'>Reject</button></form>",
    )


async def _decide(runtime: Runtime, token: str, *, approve: bool) -> Response[str]:
    claims = await _claims(runtime, token)
    if claims is None:
        return _invalid()
    deps = runtime.resources.require(AdRulesDeps)
    call: Any = decide.approve if approve else decide.reject
    try:
        result = await call(
            deps,
            workspace_id=claims.workspace_id,
            batch_id=claims.batch_id,
            decided_by=LINK_ACTOR,
            actor=ANONYMOUS,
        )
    except Conflict as exc:
        return _page("Not approved", f"<p>{escape(exc.message)}</p>", 409)
    if result.claimed == 0:
        return _page("Nothing to decide", "<p>Every change of this run was already decided.</p>")
    if not approve:
        return _page("Rejected", f"<p>{result.rejected} changes rejected; nothing was written.</p>")
    return _page(
        "Approved",
        f"<p>{result.executed} changes applied, {result.skipped} skipped, "
        f"{result.failed} failed. The run's log says why for each.</p>",
    )


@post(f"{PREFIX}/{{token:str}}", status_code=200)
async def approve_by_link(runtime: CurrentRuntime, token: FromPath[str]) -> Response[str]:
    return await _decide(runtime, token, approve=True)


@post(f"{PREFIX}/{{token:str}}/reject", status_code=200)
async def reject_by_link(runtime: CurrentRuntime, token: FromPath[str]) -> Response[str]:
    return await _decide(runtime, token, approve=False)


ROUTES: list[Any] = [approval_page, approve_by_link, reject_by_link]
