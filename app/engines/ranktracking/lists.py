"""Keyword lists: create, rename, add and remove keywords, import text or CSV.

Keywords are normalised and de-duplicated; a bulk add skips keywords the list already has and
reports them rather than failing. Changes affect the next request of linked schedules only (RT-4).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError

from app.db.dialect import row_count
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.ranktracking.errors import ListNotFound
from app.engines.ranktracking.keywords import normalise, normalise_all
from app.engines.ranktracking.members import list_keywords, list_size
from app.engines.ranktracking.models import KeywordList, ListKeyword
from app.engines.ranktracking.schemas import BulkAddOut, ListDetailOut, ListOut, RemovedOut
from app.errors import Conflict

MAX_LIST_KEYWORDS = 10_000


async def get_list(session: ReadSession, workspace_id: int, list_id: int) -> KeywordList:
    found = await session.scalar(
        scoped_select(KeywordList, workspace_id).where(KeywordList.id == list_id)
    )
    if found is None:
        raise ListNotFound("keyword list not found")
    return found


async def _name_taken(session: ReadSession, workspace_id: int, name: str, but: int | None) -> bool:
    stmt = scoped_select(KeywordList, workspace_id, KeywordList.id).where(
        func.lower(KeywordList.name) == name.lower()
    )
    if but is not None:
        stmt = stmt.where(KeywordList.id != but)
    return (await session.scalar(stmt)) is not None


async def create_list(
    session: WriteSession, *, workspace_id: int, name: str, keywords: list[str], now: datetime
) -> tuple[KeywordList, BulkAddOut]:
    name = name.strip()
    if await _name_taken(session, workspace_id, name, None):
        raise Conflict(f'a keyword list named "{name}" exists', code="list_name_taken")
    kl = KeywordList(workspace_id=workspace_id, name=name, created_at=now, updated_at=now)
    session.add(kl)
    try:
        await session.flush()
    except IntegrityError as exc:
        raise Conflict(f'a keyword list named "{name}" exists', code="list_name_taken") from exc
    report = await add_keywords(session, kl, keywords, now=now)
    return kl, report


async def rename_list(session: WriteSession, kl: KeywordList, name: str, now: datetime) -> None:
    name = name.strip()
    if await _name_taken(session, kl.workspace_id, name, kl.id):
        raise Conflict(f'a keyword list named "{name}" exists', code="list_name_taken")
    kl.name = name
    kl.updated_at = now


async def add_keywords(
    session: WriteSession, kl: KeywordList, raw: list[str], *, now: datetime
) -> BulkAddOut:
    norm = normalise_all(raw)
    existing: set[str] = set()
    for start in range(0, len(norm.keywords), 500):
        chunk = norm.keywords[start : start + 500]
        existing |= set(
            (
                await session.execute(
                    select(ListKeyword.keyword).where(
                        ListKeyword.list_id == kl.id, ListKeyword.keyword.in_(chunk)
                    )
                )
            ).scalars()
        )
    new = [kw for kw in norm.keywords if kw not in existing]
    size = await list_size(session, kl.id)
    if size + len(new) > MAX_LIST_KEYWORDS:
        raise Conflict(
            f"a keyword list holds at most {MAX_LIST_KEYWORDS} keywords", code="list_too_large"
        )
    if new:
        await session.execute(
            ListKeyword.__table__.insert(),  # type: ignore[attr-defined]
            [{"list_id": kl.id, "keyword": kw, "created_at": now} for kw in new],
        )
        kl.updated_at = now
    return BulkAddOut(
        added=new,
        skipped_existing=[kw for kw in norm.keywords if kw in existing],
        skipped_duplicates=norm.duplicates,
        invalid=norm.invalid,
        keyword_count=size + len(new),
    )


async def remove_keywords(
    session: WriteSession, kl: KeywordList, raw: list[str], *, now: datetime
) -> RemovedOut:
    targets = sorted({normalise(k) for k in raw if normalise(k)})
    removed = 0
    if targets:
        result = await session.execute(
            delete(ListKeyword).where(
                ListKeyword.list_id == kl.id, ListKeyword.keyword.in_(targets)
            )
        )
        removed = row_count(result)
        kl.updated_at = now
    return RemovedOut(removed=removed, keyword_count=await list_size(session, kl.id))


async def list_out(session: ReadSession, kl: KeywordList) -> ListOut:
    return ListOut(
        id=kl.id,
        name=kl.name,
        keyword_count=await list_size(session, kl.id),
        created_at=kl.created_at,
        updated_at=kl.updated_at,
    )


async def detail_out(session: ReadSession, kl: KeywordList) -> ListDetailOut:
    keywords = await list_keywords(session, kl.id)
    return ListDetailOut(
        id=kl.id,
        name=kl.name,
        keyword_count=len(keywords),
        created_at=kl.created_at,
        updated_at=kl.updated_at,
        keywords=keywords,
    )


async def all_lists(session: ReadSession, workspace_id: int) -> list[ListOut]:
    rows = await session.execute(
        scoped_select(KeywordList, workspace_id, KeywordList, func.count(ListKeyword.id))
        .outerjoin(ListKeyword, ListKeyword.list_id == KeywordList.id)
        .group_by(KeywordList.id)
        .order_by(KeywordList.name)
    )
    return [
        ListOut(
            id=kl.id,
            name=kl.name,
            keyword_count=int(count),
            created_at=kl.created_at,
            updated_at=kl.updated_at,
        )
        for kl, count in rows.all()
    ]
