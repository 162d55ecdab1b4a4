"""The receiver of webhook sources: ``POST /hooks/funnels/sources/{public_id}``.

The source named in the URL gives the workspace, the provider whose signature scheme applies and
its secret (see :mod:`app.engines.funnels.events.sources.signatures`). A request whose signature does not
verify — wrong secret, missing header, a timestamp more than five minutes old (a replay) — is
answered 401 and stores nothing; a verified one stores its one inbound event (idempotent on the
provider's event id) and is answered 202 before anything is processed.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.params import FromPath

from app.engines.funnels.events.sources.receive import inbound_event
from app.engines.funnels.events.sources.service import verifier
from app.engines.funnels.events.sources.signatures import SignatureRefused, verify
from app.errors import NotFound, Unauthorized
from app.web.auth import CurrentRuntime
from app.web.hooks.funnels_public import Accepted, store_event
from app.web.input_guard import check_json


@post("/hooks/funnels/sources/{public_id:str}", status_code=202)
async def source_webhook(
    request: Request[Any, Any, Any], runtime: CurrentRuntime, public_id: FromPath[str]
) -> Accepted:
    """A payment or booking provider's event, verified with the source's own scheme."""
    body = await request.body()
    if len(public_id) > 40:
        raise NotFound("unknown webhook source")
    async with runtime.db.read() as session:
        source = await verifier(session, runtime.secrets, public_id)
    if source is None:
        raise NotFound("unknown webhook source")
    try:
        verify(source.provider, source.secret, body, request.headers, runtime.clock.now())
    except SignatureRefused as exc:
        raise Unauthorized(str(exc)) from None
    check_json(body)
    event = inbound_event(source.provider, source.receives, body)
    if event is None:
        return Accepted(stored=False)
    stored = await store_event(
        runtime,
        workspace_id=source.workspace_id,
        source=event.source,
        name=event.name,
        external_id=event.external_id,
        payload={**event.payload, "webhook_source": source.source_id},
    )
    return Accepted(stored=stored is not None, id=stored)


ROUTES: list[Any] = [source_webhook]
