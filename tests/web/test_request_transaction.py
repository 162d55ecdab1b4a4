"""A handler's unit of work is the request's (issue 12, item 5): committed once when the handler
returns, rolled back when it raises, and a commit the database refuses is the request's answer —
never a success over nothing written. Jobs and other after-commit work run only after a commit."""

from __future__ import annotations

import httpx
from litestar import Litestar, get, post
from litestar.params import FromPath, FromQuery
from sqlalchemy import select

from app.engines.funnels.models import Tag
from app.errors import Conflict
from app.runtime import Runtime
from app.web.deps import DEPENDENCIES, Reads, Writes
from app.web.errors import EXCEPTION_HANDLERS
from tests.factories import Tenant

after_commit: list[str] = []


@post("/tags/{name:str}", status_code=201)
async def add_tag(
    uow: Writes,
    name: FromPath[str],
    ws: FromQuery[int],
    fail: FromQuery[bool] = False,
    twice: FromQuery[bool] = False,
) -> str:
    uow.session.add(Tag(workspace_id=ws, name=name))
    await uow.session.flush()
    if twice:
        # Not flushed: the unique index refuses it only when the dependency commits.
        uow.session.add(Tag(workspace_id=ws, name=name))

    async def remember() -> None:
        after_commit.append(name)

    uow.after_commit(remember)
    if fail:
        raise Conflict("refused after writing")
    return name


@get("/tags")
async def tag_names(session: Reads, ws: FromQuery[int]) -> list[str]:
    return list(await session.scalars(select(Tag.name).where(Tag.workspace_id == ws)))


def _client(runtime: Runtime) -> httpx.AsyncClient:
    """A client on a small app with the request dependencies, in the test's event loop (the
    database's connections belong to it)."""
    app = Litestar(
        [add_tag, tag_names], dependencies=DEPENDENCIES, exception_handlers=EXCEPTION_HANDLERS
    )
    app.state.runtime = runtime
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")


async def test_a_handler_that_returns_is_committed_once(runtime: Runtime, tenant: Tenant) -> None:
    after_commit.clear()
    async with _client(runtime) as c:
        r = await c.post(f"/tags/kept?ws={tenant.workspace_id}")
        assert r.status_code == 201, r.text
        assert (await c.get(f"/tags?ws={tenant.workspace_id}")).json() == ["kept"]
    assert after_commit == ["kept"]


async def test_a_handler_that_raises_leaves_nothing_written(
    runtime: Runtime, tenant: Tenant
) -> None:
    after_commit.clear()
    async with _client(runtime) as c:
        r = await c.post(f"/tags/dropped?ws={tenant.workspace_id}&fail=true")
        assert r.status_code == 409
        assert r.json()["message"] == "refused after writing"
        assert (await c.get(f"/tags?ws={tenant.workspace_id}")).json() == []
    assert after_commit == []


async def test_a_refused_commit_is_the_answer_not_a_success(
    runtime: Runtime, tenant: Tenant
) -> None:
    after_commit.clear()
    async with _client(runtime) as c:
        r = await c.post(f"/tags/twin?ws={tenant.workspace_id}&twice=true")
        assert r.status_code == 409, r.text
        assert r.json()["code"] == "conflict"
        assert (await c.get(f"/tags?ws={tenant.workspace_id}")).json() == []
    assert after_commit == []
