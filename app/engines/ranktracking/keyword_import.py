"""Keyword import as a background job: the same text or CSV as the direct import, applied to the
list in bounded chunks by :mod:`app.scheduling.bulk` (each chunk its own short transaction, the
job's status and per-entry report under ``/api/v1/jobs``).

The request checks the import (the list exists, something to import, no more keywords than a list
can hold: 404/422 with nothing written) and stores the parsed entries; each chunk normalises its
entries, skips those the list already has (an earlier chunk's included), refuses empty or too
long ones and those beyond the list's limit, one report line each, numbered by entry.
"""

from __future__ import annotations

from datetime import datetime

import msgspec
from sqlalchemy import select

from app.db.dialect import insert_ignoring
from app.db.session import UnitOfWork, WriteSession
from app.engines.ranktracking.keywords import (
    MAX_KEYWORD_LENGTH,
    normalise,
    normalise_all,
    parse_import,
)
from app.engines.ranktracking.lists import MAX_LIST_KEYWORDS, get_list
from app.engines.ranktracking.members import list_size
from app.engines.ranktracking.models import KeywordList, ListKeyword
from app.errors import ValidationFailed
from app.scheduling.bulk import BulkKind, Chunk, ItemError, StepInput, bulk_job_spec, submit
from app.scheduling.bulk_models import BulkJob
from app.scheduling.queue import JobQueue


def _entries(source: str) -> list[str]:
    return msgspec.json.decode(source, type=list[str]) if source else []


async def import_step(session: WriteSession, step: StepInput) -> Chunk:
    """Apply the next ``step.limit`` entries to the list."""
    entries = _entries(step.source)
    start = int(step.job.cursor.get("next", 0))
    piece = entries[start : start + step.limit]
    end = start + len(piece)
    cursor = {"next": end}
    kl = await session.scalar(
        select(KeywordList)
        .where(KeywordList.id == int(step.job.params["list_id"]))
        .with_for_update()
    )
    if kl is None:
        rest = len(entries) - start
        gone = ItemError(start + 1, "list_id", "the keyword list was deleted during the import")
        return Chunk({"next": len(entries)}, rest, True, counters={"failed": rest}, errors=[gone])
    errors: list[ItemError] = []
    wanted: dict[str, int] = {}
    repeated = 0
    for number, raw in enumerate(piece, start=start + 1):
        keyword = normalise(raw)
        if not keyword or len(keyword) > MAX_KEYWORD_LENGTH:
            errors.append(
                ItemError(
                    number, "keyword", f"empty or longer than {MAX_KEYWORD_LENGTH} characters"
                )
            )
        elif keyword in wanted:
            repeated += 1
        else:
            wanted[keyword] = number
    existing = set(
        (
            await session.execute(
                select(ListKeyword.keyword).where(
                    ListKeyword.list_id == kl.id, ListKeyword.keyword.in_(list(wanted))
                )
            )
        ).scalars()
    )
    new = [kw for kw in wanted if kw not in existing]
    room = max(0, MAX_LIST_KEYWORDS - await list_size(session, kl.id))
    errors += [
        ItemError(wanted[kw], "keyword", f"the list already holds {MAX_LIST_KEYWORDS} keywords")
        for kw in new[room:]
    ]
    new = new[:room]
    if new:
        await session.execute(
            insert_ignoring(session, ListKeyword, ["list_id", "keyword"]),
            [{"list_id": kl.id, "keyword": kw, "created_at": step.now} for kw in new],
        )
        kl.updated_at = step.now
    errors.sort(key=lambda e: e.item)
    return Chunk(
        cursor,
        len(piece),
        end >= len(entries),
        counters={"added": len(new), "skipped": len(existing) + repeated, "failed": len(errors)},
        errors=errors,
    )


KEYWORDS_IMPORT = BulkKind("ranktracking.keywords_import", import_step, title="Keyword import")
KEYWORDS_IMPORT_JOB = bulk_job_spec(KEYWORDS_IMPORT)


async def start_keyword_import(
    uow: UnitOfWork,
    queue: JobQueue,
    *,
    workspace_id: int,
    list_id: int,
    text: str,
    fmt: str,
    now: datetime,
) -> BulkJob:
    """Check the import (nothing is written when it is refused) and queue it."""
    kl = await get_list(uow.session, workspace_id, list_id)
    entries = parse_import(text, fmt=fmt)
    if not entries:
        raise ValidationFailed.field("text", "no keywords to import")
    if len(normalise_all(entries).keywords) > MAX_LIST_KEYWORDS:
        raise ValidationFailed.field(
            "text",
            f"more than the {MAX_LIST_KEYWORDS} keywords a list can hold",
            code="list_too_large",
        )
    return await submit(
        uow,
        queue,
        KEYWORDS_IMPORT_JOB,
        workspace_id=workspace_id,
        kind=KEYWORDS_IMPORT,
        now=now,
        params={"list_id": kl.id},
        source=msgspec.json.encode(entries).decode(),
        total=len(entries),
    )
