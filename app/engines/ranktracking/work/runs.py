"""The provider worker (spec §12): post a child run's tasks, poll them, store what came back, end
the run and settle its reservation (RT-13, RT-14, RT-24, RT-33 to RT-35).

Each job is a thin wrapper around an ``*_impl`` function that tests call directly. The child run id
travels in every task's ``tag``. "Still in queue" answers leave a keyword pending and the run is
polled again; only when the run ends is an unanswered keyword counted missing. A failed fetch never
writes a position: ``position`` stays empty unless the provider returned the site within the depth.
Collecting finished tasks is the shared poller's job (:mod:`.poller`, one for the provider
account). When postbacks are on (``RT_POSTBACKS``) every task carries the run's postback address;
what the provider posts back goes through :func:`apply_outcomes` like a poll's results, and
polling stays on as the fallback.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select, update

from app.db.session import UnitOfWork, WriteSession
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.explain import snapshot
from app.engines.ranktracking.explain_models import SerpSnapshot
from app.engines.ranktracking.models import (
    DISPATCHING,
    NO_DATA,
    PENDING,
    RETRIEVED,
    RUNNING,
    TASK_FAILED,
    Result,
    Run,
)
from app.engines.ranktracking.pricing import PRIORITY
from app.engines.ranktracking.reports.serp_reading import competitor_positions, owned_features
from app.engines.ranktracking.result_states import RESULTS
from app.engines.ranktracking.run_states import RUNS
from app.engines.ranktracking.work.postback_token import postback_url
from app.engines.ranktracking.work.run_end import finalize
from app.integrations.serp import (
    AuthenticationFailed,
    InvalidRequest,
    KeywordDataResult,
    KeywordDataTask,
    PaymentRequired,
    PostedTask,
    ProviderError,
    SerpClient,
    SerpTask,
    SerpTaskResult,
    TransientProviderError,
)
from app.scheduling.job_lease import check_lease
from app.scheduling.jobs import (
    DEFAULT_QUEUE,
    PRIORITY_QUEUE,
    JobContext,
    JobPayload,
    JobSpec,
    OwnedBy,
)

log = logging.getLogger(__name__)


class RunRef(JobPayload, frozen=True):
    run_id: int


# -- posting ----------------------------------------------------------------------------------------


def _serp_tasks(run: Run, keywords: list[str], postback: str | None) -> list[SerpTask]:
    return [
        SerpTask(
            tag=str(run.id),
            keyword=kw,
            location_code=run.location_code or 0,
            language_code=run.language_code or "",
            device=run.device or "desktop",
            depth=run.depth or 10,
            priority=2 if run.queue == PRIORITY else 1,
            postback_url=postback,
        )
        for kw in keywords
    ]


def _error_code(exc: ProviderError) -> str:
    if isinstance(exc, PaymentRequired):
        return "provider_payment_required"
    if isinstance(exc, TransientProviderError):
        return "provider_unconfirmed" if exc.may_have_succeeded else "provider_unavailable"
    return f"provider_{exc.status_code}" if exc.status_code else "provider_error"


async def post_impl(
    deps: RankTrackingDeps, client: SerpClient, run_id: int, *, final_attempt: bool
) -> None:
    """Send a ``dispatching`` run's keywords to the provider (idempotent per keyword)."""
    async with deps.db.read() as session:
        run = await session.get(Run, run_id)
        if run is None or run.status != DISPATCHING:
            return
        posted_before = set(
            (await session.execute(select(Result.keyword).where(Result.run_id == run_id))).scalars()
        )
        postback = (
            await postback_url(session, deps.secrets, deps.settings.web.public_url, run)
            if deps.settings.ranktracking.postbacks
            else None
        )
    todo = [kw for kw in run.keywords if kw not in posted_before]
    posted: list[PostedTask] = []
    error: ProviderError | None = None
    try:
        if run.data_type == "serp":
            posted = await client.post_serp_tasks(_serp_tasks(run, todo, postback))
        elif todo:
            posted = await client.post_keyword_data_tasks(
                [
                    KeywordDataTask(
                        tag=str(run.id),
                        keywords=todo,
                        location_code=run.location_code or 0,
                        language_code=run.language_code or "",
                        postback_url=postback,
                    )
                ]
            )
    except ProviderError as exc:
        posted, error = list(exc.posted), exc
    retry_later = (
        isinstance(error, TransientProviderError)
        and not error.may_have_succeeded
        and not final_attempt
    )
    now = deps.clock.now()
    async with deps.db.write() as uow:
        run = await _lock_run(uow.session, run_id)
        if run is None or run.status != DISPATCHING:
            return
        rows = _rows_for_posted(run, todo, posted)
        answered = {r["keyword"] for r in rows}
        if error is not None and not retry_later:
            code = _error_code(error)
            rows += [
                _row(run, kw, state=TASK_FAILED, error_code=code)
                for kw in todo
                if kw not in answered
            ]
        if rows:
            await uow.session.execute(Result.__table__.insert(), rows)  # type: ignore[attr-defined]
        run.provider_cost = (run.provider_cost or Decimal(0)) + sum(
            (p.cost for p in posted), Decimal(0)
        )
        run.updated_at = now
        if retry_later:
            pass
        elif await _count(uow.session, run.id, PENDING):
            # From here the shared poller (:mod:`.poller`) collects the tasks as they finish.
            RUNS.move(run, RUNNING)
            run.started_at = now
        else:
            await finalize(uow, deps, run, now)
    if retry_later and error is not None:
        raise error


def _row(
    run: Run, keyword: str, *, state: str, task_id: str | None = None, error_code: str | None = None
) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "schedule_id": run.schedule_id,
        "keyword": keyword,
        "device": run.device,
        "task_id": task_id,
        **RESULTS.create(state),
        "position": None,
        "url": None,
        "features": None,
        "data": None,
        "error_code": error_code,
        "fetched_at": None,
    }


def _rows_for_posted(run: Run, todo: list[str], posted: list[PostedTask]) -> list[dict[str, Any]]:
    if run.data_type == "serp":
        # Answers come back one per task, in order.
        return [
            _posted_row(run, keyword, task) for keyword, task in zip(todo, posted, strict=False)
        ]
    # Keyword data: one task carries every keyword.
    return [_posted_row(run, keyword, posted[0]) for keyword in todo] if posted else []


def _posted_row(run: Run, keyword: str, task: PostedTask) -> dict[str, Any]:
    """The keyword's row: pending on the task the provider created, or failed with its code."""
    if task.created:
        return _row(run, keyword, state=PENDING, task_id=task.task_id)
    return _row(run, keyword, state=TASK_FAILED, error_code=f"provider_{task.status_code}")


# -- polling ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one fetched task says about its keywords: ``{keyword: (state, values)}``; keywords
    absent from the mapping stay pending."""

    per_keyword: dict[str, tuple[str, dict[str, Any]]]
    snapshots: dict[str, bytes] = field(default_factory=dict)
    """Keyword → its results page, encoded (:mod:`..explain.snapshot`), stored beside the result."""


def outcome_of(
    run: Run, result: SerpTaskResult | KeywordDataResult, keywords: list[str]
) -> Outcome:
    """What a task result (fetched by a poll or posted back) says about ``keywords``."""
    if isinstance(result, SerpTaskResult):
        return _serp_outcome(result, keywords[0], run.domain, list(run.competitors or []))
    return _keyword_data_outcome(result, keywords, list(run.packages or []))


def _serp_outcome(
    result: SerpTaskResult, keyword: str, domain: str | None, competitors: list[str]
) -> Outcome:
    if result.state == "in_queue":
        return Outcome({})
    if result.state == "no_results":
        return Outcome({keyword: (NO_DATA, {})})
    if result.state == "error":
        return Outcome({keyword: (TASK_FAILED, {"error_code": f"provider_{result.status_code}"})})
    item = result.find(domain) if domain else None
    position = item.rank_group if item is not None and item.rank_group > 0 else None
    return Outcome(
        snapshots={keyword: snapshot.encode(snapshot.of_result(result))},
        per_keyword={
            keyword: (
                RETRIEVED,
                {
                    "position": position,
                    "url": item.url if item is not None else None,
                    "features": sorted(set(result.item_types)),
                    "owned_features": owned_features(result, domain),
                    # Read from the same page: competitors cost nothing extra.
                    "competitors": competitor_positions(result, competitors) or None,
                },
            )
        },
    )


def _keyword_data_outcome(
    result: KeywordDataResult, keywords: list[str], packages: list[str]
) -> Outcome:
    if result.state == "in_queue":
        return Outcome({})
    if result.state == "no_results":
        return Outcome({kw: (NO_DATA, {}) for kw in keywords})
    if result.state == "error":
        code = {"error_code": f"provider_{result.status_code}"}
        return Outcome({kw: (TASK_FAILED, code) for kw in keywords})
    rows = {" ".join(r.keyword.split()).casefold(): r for r in result.rows}
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for kw in keywords:
        row = rows.get(kw)
        if row is None:
            out[kw] = (TASK_FAILED, {"error_code": "not_returned"})
        elif not row.has_data:
            out[kw] = (NO_DATA, {})
        else:
            data: dict[str, Any] = {}
            if "volume" in packages:
                data["search_volume"] = row.search_volume
            if "cpc" in packages:
                data["cpc"] = str(row.cpc) if row.cpc is not None else None
                data["competition"] = row.competition
            if "trends" in packages:
                data["monthly_searches"] = [
                    {"year": m.year, "month": m.month, "search_volume": m.search_volume}
                    for m in row.monthly_searches
                ]
            out[kw] = (RETRIEVED, {"data": data})
    return Outcome(out)


async def fetch_task(
    client: SerpClient, run: Run, task_id: str, keywords: list[str]
) -> Outcome | None:
    """Fetch one task; None when the fetch failed or its answer was unreadable (``task_get`` is
    free and repeatable: the poller tries again) or the task is still queued."""
    try:
        result: SerpTaskResult | KeywordDataResult
        if run.data_type == "serp":
            result = await client.get_serp_task(task_id)
        else:
            result = await client.get_keyword_data_task(task_id)
    except (TransientProviderError, InvalidRequest, AuthenticationFailed):
        return None
    except ProviderError as exc:
        if exc.status_code is None:
            return None  # not a provider envelope at all (garbage, a proxy's page): read again
        return Outcome({kw: (TASK_FAILED, {"error_code": _error_code(exc)}) for kw in keywords})
    outcome = outcome_of(run, result, keywords)
    return outcome if outcome.per_keyword else None


async def apply_outcomes(
    uow: UnitOfWork,
    deps: RankTrackingDeps,
    run_id: int,
    outcomes: list[Outcome],
    now: datetime,
) -> int:
    """Apply task results to a running child run — the one path of polls and postbacks alike.

    Idempotent: a keyword's result is written only while it is still pending, and the run ends
    (and settles) only while it is ``running`` under the row lock, so a postback followed by a
    poll, or the same postback twice, stores each result once and settles once. The run ends
    when nothing is left pending.

    Returns how many keyword results were written.
    """
    run = await _lock_run(uow.session, run_id)
    if run is None or run.status != RUNNING:
        return 0
    written = 0
    keep_pages = deps.settings.ranktracking.snapshot_retention_days > 0
    for outcome in outcomes:
        written += await _store(uow.session, run, outcome, now, keep_pages=keep_pages)
    if written:
        run.retrieved = await _count(uow.session, run.id, RETRIEVED)
        run.no_data = await _count(uow.session, run.id, NO_DATA)
        run.updated_at = now
    if not await _count(uow.session, run.id, PENDING):
        await finalize(uow, deps, run, now)
    return written


async def _store(
    session: WriteSession, run: Run, outcome: Outcome, now: datetime, *, keep_pages: bool
) -> int:
    written = 0
    for keyword, (state, values) in outcome.per_keyword.items():
        result = await session.execute(
            RESULTS.transition(
                update(Result).where(Result.run_id == run.id, Result.keyword == keyword),
                state,
                from_=(PENDING,),
            )
            .values(fetched_at=now, **values)
            .returning(Result.id)
            .execution_options(synchronize_session=False)
        )
        stored = result.scalars().all()
        written += len(stored)
        page = outcome.snapshots.get(keyword)
        if stored and page is not None and keep_pages:
            # Written with the result, once: a repeated answer updates no row and adds none.
            session.add(
                SerpSnapshot(
                    result_id=stored[0], schedule_id=run.schedule_id, body=page, created_at=now
                )
            )
    return written


# -- helpers and job wrappers ---------------------------------------------------------------------


async def _lock_run(session: WriteSession, run_id: int) -> Run | None:
    return (
        await session.execute(
            select(Run)
            .where(Run.id == run_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()


async def _count(session: WriteSession, run_id: int, state: str) -> int:
    return int(
        await session.scalar(
            select(func.count())
            .select_from(Result)
            .where(Result.run_id == run_id, Result.state == state)
        )
        or 0
    )


async def post_tasks(ctx: JobContext, payload: RunRef) -> None:
    final = POST_JOB.is_last_attempt(ctx.attempt)
    # A job whose lease another worker took over must not post the run's keywords again.
    await check_lease(ctx)
    deps = RankTrackingDeps.of(ctx)
    await post_impl(deps, deps.serp, payload.run_id, final_attempt=final)


POST_JOB = JobSpec(
    name="ranktracking.post_tasks",
    payload_type=RunRef,
    handler=post_tasks,
    max_tries=5,
    queue=DEFAULT_QUEUE,
    backoff_seconds=20.0,
    owner=OwnedBy("run_id", Run),
)
POST_PRIORITY_JOB = JobSpec(
    name="ranktracking.post_tasks_priority",
    payload_type=RunRef,
    handler=post_tasks,
    max_tries=5,
    queue=PRIORITY_QUEUE,
    backoff_seconds=10.0,
    owner=OwnedBy("run_id", Run),
)
