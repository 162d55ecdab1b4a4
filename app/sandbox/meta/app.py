"""The simulated Graph API over HTTP: versioned GET/POST paths, ``POST /`` batch requests, the token
from ``Authorization: Bearer`` or ``access_token``, and usage headers on every reply; and Facebook
Login's dialog (``/{version}/dialog/oauth``, www.facebook.com in production) on the same port."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import msgspec
from litestar import Litestar, MediaType, Request, Response, get, post
from litestar.params import FromPath

from app.sandbox.base import (
    Fault,
    ThreadedServer,
    fault_response,
    simulator_app,
    start_simulator,
)
from app.sandbox.meta.world import MAX_BATCH, GraphWorld, SimReply, graph_error

AnyRequest = Request[Any, Any, Any]


def _token(request: AnyRequest, params: dict[str, str]) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return params.get("access_token") or None


async def _params(request: AnyRequest) -> dict[str, str]:
    params = dict(request.query_params.items())
    if request.method == "POST":
        content_type = request.headers.get("content-type", "")
        if content_type.startswith("application/json"):
            body = await request.json()
            if isinstance(body, dict):
                params.update(
                    {
                        k: v if isinstance(v, str) else msgspec.json.encode(v).decode()
                        for k, v in body.items()
                    }
                )
        else:
            form = await request.form()
            params.update({k: str(v) for k, v in form.items()})
    return params


def _response(reply: SimReply) -> Response[Any]:
    return Response(
        reply.body, status_code=reply.status, headers=reply.headers, media_type=MediaType.JSON
    )


def _batch_item(reply: SimReply | Fault, include_headers: bool) -> dict[str, Any] | None:
    if isinstance(reply, Fault):
        if reply.delay_seconds:
            return None  # the sub-request did not finish before Meta's batch timeout
        body = (
            reply.raw.decode()
            if reply.raw is not None
            else msgspec.json.encode(
                reply.body if reply.body is not None else graph_error(2, "injected fault")
            ).decode()
        )
        # A failed sub-request carries its own headers (a throttle's usage headers among them).
        fault_headers = [{"name": k, "value": v} for k, v in reply.headers.items()]
        return {"code": reply.status, "headers": fault_headers, "body": body}
    headers = [{"name": k, "value": v} for k, v in reply.headers.items()]
    if not include_headers:
        return {"code": reply.status, "body": msgspec.json.encode(reply.body).decode()}
    return {
        "code": reply.status,
        "headers": headers,
        "body": msgspec.json.encode(reply.body).decode(),
    }


def _sub_request_error(message: str) -> dict[str, Any]:
    """A batch item Meta refuses before carrying it out, answered in its slot of the batch."""
    return {
        "code": 400,
        "headers": [],
        "body": msgspec.json.encode(graph_error(100, message)).decode(),
    }


def _batch_items(params: dict[str, str]) -> list[Any] | Response[Any]:
    """The decoded ``batch`` parameter, or Meta's answer to a missing, empty or too long one."""
    try:
        items = msgspec.json.decode(params.get("batch", ""))
    except msgspec.DecodeError:
        items = None
    if not isinstance(items, list) or not items:
        return _response(SimReply(400, graph_error(100, "(#100) The parameter batch is required")))
    if len(items) > MAX_BATCH:
        return _response(
            SimReply(
                400,
                graph_error(
                    1, f"Too many requests in batch message. Maximum batch size is {MAX_BATCH}"
                ),
            )
        )
    return items


def _record_batch(world: GraphWorld, items: list[Any]) -> None:
    """Keep the batch as (method, relative URL, body) per item, for tests to read."""
    world.batch_calls.append(
        [
            (
                str(item.get("method", "GET")).upper(),
                str(item.get("relative_url", "")),
                item.get("body"),
            )
            if isinstance(item, dict)
            else ("?", "", None)
            for item in items
        ]
    )


def _run_batch_item(
    world: GraphWorld, item: Any, token: str, include_headers: bool
) -> dict[str, Any] | None:
    """Carry out one sub-request of a batch, with the batch's token unless it names its own."""
    if not isinstance(item, dict) or "relative_url" not in item:
        return _sub_request_error("(#100) relative_url is required")
    if "body" in item and not isinstance(item["body"], str):
        # Meta takes a sub-request's parameters as one form-encoded string, not an object.
        return _sub_request_error("(#100) body must be a form-encoded string")
    url = urlsplit(str(item["relative_url"]).lstrip("/"))
    sub = dict(parse_qsl(url.query))
    if isinstance(item.get("body"), str):
        sub.update(dict(parse_qsl(item["body"])))
    method = str(item.get("method", "GET")).upper()
    reply = world.handle(method, url.path, sub, sub.get("access_token") or token)
    return _batch_item(reply, include_headers)


async def _client_left(request: AnyRequest, seconds: float) -> bool:
    """Wait ``seconds``, or less when the client closes the connection first (True then)."""

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    gone = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait_for(asyncio.shield(gone), timeout=seconds)
    except TimeoutError:
        return False
    finally:
        gone.cancel()
    return True


async def _answer(
    world: GraphWorld, request: AnyRequest, path: str, params: dict[str, str]
) -> Response[Any]:
    reply = world.handle(request.method, path, params, _token(request, params))
    if isinstance(reply, Fault):
        if not reply.delay_seconds:
            return await fault_response(reply)
        # Counted while held, until answered or until the client gave up and went away.
        generation = world.hold_started()
        try:
            if await _client_left(request, reply.delay_seconds):
                return Response(b"", status_code=499)  # nobody is there to read it
            return await fault_response(dataclasses.replace(reply, delay_seconds=0.0))
        finally:
            world.hold_ended(generation)
    return _response(reply)


async def _batch(world: GraphWorld, request: AnyRequest, params: dict[str, str]) -> Response[Any]:
    token = _token(request, params)
    if token is None or token not in world.tokens:
        return _response(
            SimReply(
                400, graph_error(190, "Invalid OAuth access token - Cannot parse access token")
            )
        )
    fault = world.state.hit("batch")
    if fault is not None:
        return await fault_response(fault)
    items = _batch_items(params)
    if isinstance(items, Response):
        return items
    include_headers = params.get("include_headers", "true").lower() != "false"
    _record_batch(world, items)
    writes = any(isinstance(i, dict) and str(i.get("method", "")).upper() == "POST" for i in items)
    nulls = world.take_null_items(writes=writes)
    # The last ``nulls`` items are not reached before the timeout: they are not carried out.
    reached = items[: len(items) - nulls] if nulls else items
    out = [_run_batch_item(world, item, token, include_headers) for item in reached]
    out.extend([None] * (len(items) - len(reached)))
    return Response(out, status_code=200, media_type=MediaType.JSON)


async def _dialog(world: GraphWorld, params: dict[str, str]) -> Response[Any]:
    """The login dialog (www.facebook.com in production): the simulated person answers at once
    and the browser is sent back to the app, or shown Meta's error page."""
    fault = world.state.hit("dialog")
    if fault is not None:
        return await fault_response(fault)
    status, where = world.oauth.dialog(params, sorted(world.accounts))
    if status == 302:
        return Response(b"", status_code=302, headers={"location": where})
    return Response(where, status_code=status, media_type=MediaType.TEXT)


def create_app(world: GraphWorld) -> Litestar:
    """The simulator's ASGI app over ``world``."""

    @get("/{path:path}", media_type=MediaType.JSON)
    async def graph_get(request: AnyRequest, path: FromPath[str]) -> Response[Any]:
        params = await _params(request)
        if path.strip("/").split("/")[1:] == ["dialog", "oauth"]:
            return await _dialog(world, params)
        return await _answer(world, request, path, params)

    @post("/{path:path}", media_type=MediaType.JSON, status_code=200)
    async def graph_post(request: AnyRequest, path: FromPath[str]) -> Response[Any]:
        params = await _params(request)
        # ``POST /<version>/`` with a batch is the same batch endpoint as ``POST /``.
        if "batch" in params and "/" not in path.strip("/"):
            return await _batch(world, request, params)
        return await _answer(world, request, path, params)

    @post("/", media_type=MediaType.JSON, status_code=200)
    async def graph_root(request: AnyRequest) -> Response[Any]:
        return await _batch(world, request, await _params(request))

    return simulator_app([graph_root, graph_get, graph_post])


def serve_world(world: GraphWorld, port: int | None = None) -> ThreadedServer:
    """Start the simulator for ``world`` on a loopback port, in its own thread."""
    return start_simulator(world, port)
