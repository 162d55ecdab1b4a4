"""A savepoint inside the unit of work (``uow.attempt()``, issue 12 item 5): a try that fails takes
back only its own writes and its after-commit callbacks, and the transaction goes on to commit
what came before and after it — on SQLite and on PostgreSQL, where a refused statement would
otherwise abort the whole transaction."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.db.session import AfterCommit, UnitOfWork
from app.engines.funnels.models import Tag
from app.errors import Conflict
from app.runtime import Runtime
from tests.factories import Tenant


async def _tags(runtime: Runtime, workspace_id: int) -> list[str]:
    async with runtime.db.read() as session:
        names = await session.scalars(
            select(Tag.name).where(Tag.workspace_id == workspace_id).order_by(Tag.name)
        )
        return list(names)


async def _add_in_attempt(
    uow: UnitOfWork, workspace_id: int, name: str, *, then: AfterCommit | None = None
) -> None:
    """Add a tag inside an attempt, flushed; a name starting with "refused" is then refused."""
    async with uow.attempt():
        uow.session.add(Tag(workspace_id=workspace_id, name=name))
        await uow.session.flush()
        if then is not None:
            uow.after_commit(then)
        if name.startswith("refused"):
            raise Conflict("the form is refused")


async def _write_then_fail(runtime: Runtime, workspace_id: int, then: AfterCommit) -> None:
    async with runtime.db.write() as uow:
        await _add_in_attempt(uow, workspace_id, "kept", then=then)
        raise Conflict("the request fails later")


async def test_a_failed_attempt_takes_back_only_its_own_writes(
    runtime: Runtime, tenant: Tenant
) -> None:
    ws = tenant.workspace_id
    sent: list[str] = []

    async def send(name: str) -> None:
        sent.append(name)

    async with runtime.db.write() as uow:
        uow.session.add(Tag(workspace_id=ws, name="before"))
        uow.after_commit(lambda: send("before"))
        with pytest.raises(Conflict):
            await _add_in_attempt(uow, ws, "refused", then=lambda: send("refused"))
        # The transaction is still usable: it reads what stands and writes on.
        seen = await uow.session.scalars(select(Tag.name).where(Tag.workspace_id == ws))
        assert sorted(seen) == ["before"]
        uow.session.add(Tag(workspace_id=ws, name="after"))
        uow.after_commit(lambda: send("after"))

    assert await _tags(runtime, ws) == ["after", "before"]
    assert sent == ["before", "after"]


async def test_a_statement_the_database_refuses_leaves_the_transaction_usable(
    runtime: Runtime, tenant: Tenant
) -> None:
    ws = tenant.workspace_id
    async with runtime.db.write() as uow:
        uow.session.add(Tag(workspace_id=ws, name="taken"))
        await uow.session.flush()
        with pytest.raises(IntegrityError):
            await _add_in_attempt(uow, ws, "taken")
        uow.session.add(Tag(workspace_id=ws, name="free"))

    assert await _tags(runtime, ws) == ["free", "taken"]


async def test_an_attempt_that_succeeds_is_committed_with_the_transaction(
    runtime: Runtime, tenant: Tenant
) -> None:
    ws = tenant.workspace_id
    sent: list[str] = []

    async def send() -> None:
        sent.append("kept")

    async with runtime.db.write() as uow:
        await _add_in_attempt(uow, ws, "kept", then=send)
        await _add_in_attempt(uow, ws, "second")

    assert await _tags(runtime, ws) == ["kept", "second"]
    assert sent == ["kept"]


async def test_the_transaction_rolled_back_takes_a_kept_attempt_with_it(
    runtime: Runtime, tenant: Tenant
) -> None:
    ws = tenant.workspace_id
    sent: list[str] = []

    async def send() -> None:
        sent.append("kept")

    with pytest.raises(Conflict):
        await _write_then_fail(runtime, ws, send)

    assert await _tags(runtime, ws) == []
    assert sent == []
