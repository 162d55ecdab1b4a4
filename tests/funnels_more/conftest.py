"""Fixtures of the ingestion, trigger, simulator and campaign tests: the Funnels test engine
(shared with tests/funnels), signed requests, and ``settle`` which runs ingestion and matching
the way the ingest job does."""

from __future__ import annotations

import json
import time
from typing import Any

from app.engines.funnels.events.ingest import IngestPayload, run_ingest
from app.engines.funnels.events.tracking import sign_body
from app.runtime import Runtime
from tests.funnels.conftest import (  # noqa: F401 - fixtures shared with the core tests
    Engine,
    contact,
    count,
    email_node,
    engine,
    funnel_settings,
    graph,
    node,
    published,
    runs_of,
    session_sink,
    setup_names,
    sink,
    steps_of,
)


async def settle(runtime: Runtime) -> None:
    """Process stored events, evaluate touched segments and match events to funnels."""
    await run_ingest(runtime.context(job_id="test-ingest"), IngestPayload())


def signed(
    secret: str,
    payload: Any,
    *,
    workspace_id: int | None = None,
    at: int | None = None,
    header: str = "X-Sweepline-Signature",
) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload).encode()
    headers = {
        header: sign_body(secret, body, at if at is not None else int(time.time())),
        "Content-Type": "application/json",
    }
    if workspace_id is not None:
        headers["X-Sweepline-Workspace"] = str(workspace_id)
    return body, headers


async def tagging_funnel(runtime: Runtime, ws: int, *triggers: dict[str, Any], **kw: Any) -> int:
    """A published funnel that tags whoever enters it ``entered``; returns its id."""
    await setup_names(runtime, ws, tags=["entered"])
    funnel_id, _ = await published(
        runtime, ws, graph(node("add_tag", "t", tag="entered"), triggers=list(triggers), **kw)
    )
    return funnel_id
