"""The provider's postbacks: a finished task POSTed to us instead of waiting for the next poll.

The provider sends the ``task_get`` envelope of one finished task, gzip-compressed. A postback is
authenticated by the token in its address (:mod:`.postback_token`) before its body is even
decompressed; the body is inflated with a size limit, decoded into the same result structs a poll
gets from ``task_get`` and applied through the poller's own path
(:func:`~app.engines.ranktracking.work.runs.apply_outcomes`), so a postback and a poll of the same task,
or the same postback twice, store the result once and settle the run once.

A postback that arrives before the worker has recorded the posted tasks (the run still
``dispatching``) stores nothing; the shared poller collects that task later.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import msgspec
from sqlalchemy import select

from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.errors import PostbackRefused, PostbackUnreadable
from app.engines.ranktracking.models import PENDING, Result, Run
from app.engines.ranktracking.work.postback_token import matches, run_id_of, workspace_secret
from app.engines.ranktracking.work.runs import Outcome, apply_outcomes, outcome_of
from app.integrations.serp import KeywordDataResult, SerpTaskResult
from app.integrations.serp.results import keyword_data_result, serp_result
from app.integrations.serp.wire import Envelope, WireKeyword, WireSerpResult, WireTask

MAX_INFLATED_BYTES = 8_000_000
"""The largest decompressed postback accepted (a depth-100 page with every feature is ~150 KB)."""

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class Receipt:
    run_id: int
    tasks: int
    """Tasks in the postback."""
    stored: int
    """Keyword results written now (0 when a poll or an earlier postback already had them)."""


async def receive(
    deps: RankTrackingDeps, token: str, body: bytes, content_encoding: str | None
) -> Receipt:
    """Authenticate, decode and apply one postback.

    Raises:
        PostbackRefused: the token does not authenticate a child run (401, nothing stored).
        PostbackUnreadable: the body is not a provider result for that run (400, nothing stored).
    """
    run_id = run_id_of(token)
    if run_id is None:
        raise PostbackRefused("the postback address is not valid")
    async with deps.db.read() as session:
        run = await session.get(Run, run_id)
        secret = (
            await workspace_secret(session, deps.secrets, run.workspace_id)
            if run is not None
            else None
        )
        # One answer for an unknown run and a wrong signature: the address reveals nothing.
        if run is None or secret is None or not matches(secret, token):
            raise PostbackRefused("the postback address is not valid")
        results = decode(inflate(body, content_encoding), run)
        pending = (
            await session.execute(
                select(Result.task_id, Result.keyword).where(
                    Result.run_id == run_id,
                    Result.task_id.in_([r.task_id for r in results]),
                    Result.state == PENDING,
                )
            )
        ).all()
    by_task: dict[str, list[str]] = {}
    for task_id, keyword in pending:
        by_task.setdefault(task_id or "", []).append(keyword)
    outcomes: list[Outcome] = [
        outcome_of(run, result, by_task[result.task_id])
        for result in results
        if result.task_id in by_task
    ]
    stored = 0
    if outcomes:
        async with deps.db.write() as uow:
            stored = await apply_outcomes(uow, deps, run_id, outcomes, deps.clock.now())
    return Receipt(run_id=run_id, tasks=len(results), stored=stored)


def inflate(body: bytes, content_encoding: str | None, limit: int = MAX_INFLATED_BYTES) -> bytes:
    """The body, gunzipped when it is gzip (by header or by its magic bytes), at most ``limit``
    bytes once inflated (a small body must not expand into gigabytes)."""
    encoding = (content_encoding or "").strip().lower()
    if encoding not in ("", "identity", "gzip", "x-gzip"):
        raise PostbackUnreadable(f"unsupported Content-Encoding {encoding!r}")
    if encoding in ("", "identity") and not body.startswith(_GZIP_MAGIC):
        if len(body) > limit:
            raise PostbackUnreadable("the postback is too large")
        return body
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        raw = inflater.decompress(body, limit + 1)
    except zlib.error:
        raise PostbackUnreadable("the body is not valid gzip") from None
    if len(raw) > limit or inflater.unconsumed_tail:
        raise PostbackUnreadable("the postback is too large once decompressed")
    if not inflater.eof or inflater.unused_data:
        raise PostbackUnreadable("the gzip body is truncated or has trailing data")
    return raw


def decode(raw: bytes, run: Run) -> list[SerpTaskResult] | list[KeywordDataResult]:
    """The envelope's tasks as ``task_get`` results; every task must carry the run's tag."""
    try:
        if run.data_type == "serp":
            serp = msgspec.json.decode(raw, type=Envelope[WireSerpResult])
            _check(serp.tasks, run)
            return [serp_result(task) for task in serp.tasks or []]
        volumes = msgspec.json.decode(raw, type=Envelope[WireKeyword])
        _check(volumes.tasks, run)
        return [keyword_data_result(task) for task in volumes.tasks or []]
    except msgspec.MsgspecError as exc:
        raise PostbackUnreadable(f"not a provider task result: {exc}") from None


def _check(
    tasks: list[WireTask[WireSerpResult]] | list[WireTask[WireKeyword]] | None, run: Run
) -> None:
    if not tasks:
        raise PostbackUnreadable("the postback holds no task")
    for task in tasks:
        if not task.id:
            raise PostbackUnreadable("a task of the postback has no id")
        if task.data_str("tag") != str(run.id):
            raise PostbackUnreadable("a task of the postback belongs to another run")
