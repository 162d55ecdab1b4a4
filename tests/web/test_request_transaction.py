"""A handler's unit of work is the request's (issue 12, item 5): committed once when the handler
returns, rolled back when it raises, and a commit the database refuses is the request's answer —
never a success over nothing written. Jobs and other after-commit work run only after a commit. A
form refused inside ``uow.attempt()`` is answered from the same transaction, which commits what
stands."""

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
from tests.harness.app_client import asgi_transport

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


@post("/tags/{name:str}/form", status_code=200)
async def add_tag_form(uow: Writes, name: FromPath[str], ws: FromQuery[int]) -> dict[str, object]:
    """A form handler: note the visit, try the write, and on a refusal show the form again."""
    uow.session.add(Tag(workspace_id=ws, name=f"visit-{name}"))
    error = None
    try:
        async with uow.attempt():
            uow.session.add(Tag(workspace_id=ws, name=name))
            await uow.session.flush()

            async def remember() -> None:
                after_commit.append(name)

            uow.after_commit(remember)
            if name.startswith("bad"):
                raise Conflict("names may not start with 'bad'")
    except Conflict as exc:
        error = exc.message
    names = await uow.session.scalars(select(Tag.name).where(Tag.workspace_id == ws))
    return {"error": error, "tags": sorted(names)}


@get("/tags")
async def tag_names(session: Reads, ws: FromQuery[int]) -> list[str]:
    return list(await session.scalars(select(Tag.name).where(Tag.workspace_id == ws)))


def _client(runtime: Runtime) -> httpx.AsyncClient:
    """A client on a small app with the request dependencies, in the test's event loop (the
    database's connections belong to it)."""
    app = Litestar(
        [add_tag, add_tag_form, tag_names],
        dependencies=DEPENDENCIES,
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.runtime = runtime
    return httpx.AsyncClient(transport=asgi_transport(app), base_url="http://testserver")


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


async def test_a_refused_attempt_is_answered_from_the_same_transaction(
    runtime: Runtime, tenant: Tenant
) -> None:
    after_commit.clear()
    ws = tenant.workspace_id
    async with _client(runtime) as c:
        r = await c.post(f"/tags/bad-name/form?ws={ws}")
        assert r.status_code == 200, r.text
        assert r.json() == {"error": "names may not start with 'bad'", "tags": ["visit-bad-name"]}
        r = await c.post(f"/tags/good/form?ws={ws}")
        assert r.json() == {"error": None, "tags": ["good", "visit-bad-name", "visit-good"]}
        assert sorted((await c.get(f"/tags?ws={ws}")).json()) == [
            "good",
            "visit-bad-name",
            "visit-good",
        ]
    assert after_commit == ["good"]
