"""Position tracking webhook receivers: the SERP provider's postbacks (spec §12).

``POST /hooks/ranktracking/postback/{token}`` receives one finished task, gzip-compressed, as the
provider sends it when the worker asked for a postback (``RT_POSTBACKS``). The token authenticates
the child run; a bad token answers 401 and an unreadable body 400, both storing nothing.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, post
from litestar.params import FromPath

from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.work.postback import receive
from app.web.auth import CurrentRuntime


class PostbackOut(msgspec.Struct, kw_only=True):
    run_id: int
    tasks: int
    """Tasks in the postback."""
    stored: int
    """Keyword results written by this postback (0 when they were collected already)."""


@post("/hooks/ranktracking/postback/{token:str}", status_code=200)
async def provider_postback(
    request: Request[Any, Any, Any], runtime: CurrentRuntime, token: FromPath[str]
) -> PostbackOut:
    receipt = await receive(
        RankTrackingDeps.of(runtime),
        token,
        await request.body(),
        request.headers.get("content-encoding"),
    )
    return PostbackOut(run_id=receipt.run_id, tasks=receipt.tasks, stored=receipt.stored)


ROUTES: list[Any] = [provider_postback]
