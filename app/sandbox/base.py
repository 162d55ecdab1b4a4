"""The simulator framework: one shape for every simulated provider, served on a free loopback port,
counting calls and answering injected faults.

Every simulator is a :class:`Simulator`: it holds a :class:`SandboxState` (calls counted by *kind* —
"campaigns.list", "messages.create", … — and the faults programmed for them), the ``url`` it is
served at, and :meth:`Simulator.reset`, which puts it back as it was built: no calls, no faults and
none of the data the provider accumulated or a test programmed (records, accounts, sheets,
idempotency keys …). The configuration it was built with (keys, clock, prices) stays. Tests program
faults with :meth:`Simulator.inject` and read :meth:`Simulator.count`; a session-wide simulator is
reset between tests.

An HTTP simulator (:class:`HttpSimulator`) is a Litestar app whose handlers call
:meth:`SandboxState.hit` with the kind of call; ``hit`` counts it and returns the fault programmed
for it, if any, which the handler answers with :func:`fault_response`. :func:`start_simulator`
serves one from its own thread, :func:`simulator_in_loop` inside the running event loop.
"""

from __future__ import annotations

import abc
import asyncio
import socket
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

import uvicorn
from litestar import Litestar, MediaType, Response

from app.settings_web import DEFAULT_HTTP_KEEP_ALIVE_SECONDS


@dataclass
class Fault:
    """An injected failure for calls of ``kind`` ("*" matches every kind)."""

    kind: str
    status: int = 500
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0
    """Sleep before answering (longer than the client's timeout simulates a timeout)."""
    times: int = 1
    """How many matching calls fail; -1 for every call until cleared."""
    raw: bytes | None = None
    """Send these bytes as the body instead of JSON (garbage responses)."""


@dataclass
class SandboxState:
    calls: Counter[str] = field(default_factory=Counter)
    faults: list[Fault] = field(default_factory=list)
    log: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def hit(self, kind: str, **details: Any) -> Fault | None:
        """Count one call of ``kind`` and return the fault to answer with, if one is programmed."""
        with self._lock:
            self.calls[kind] += 1
            self.calls["*"] += 1
            self.log.append((kind, details))
            for fault in self.faults:
                if fault.kind in (kind, "*") and fault.times != 0:
                    if fault.times > 0:
                        fault.times -= 1
                    return fault
        return None

    def inject(self, kind: str, **kwargs: Any) -> Fault:
        fault = Fault(kind=kind, **kwargs)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()

    def reset_counts(self) -> None:
        with self._lock:
            self.calls.clear()
            self.log.clear()

    def count(self, kind: str = "*") -> int:
        return self.calls[kind]

    def reset(self) -> None:
        """No calls counted, none logged, no fault programmed."""
        with self._lock:
            self.faults.clear()
            self.calls.clear()
            self.log.clear()


class Simulator(abc.ABC):
    """What every simulated provider offers tests, the demo and the benchmarks."""

    state: SandboxState
    url: str = ""
    """Where it is served (set when it starts); empty until then."""

    def reset(self) -> None:
        """Back to a fresh simulator: calls, faults and the provider's data as built."""
        self.state.reset()
        self.reset_data()

    @abc.abstractmethod
    def reset_data(self) -> None:
        """Drop what the provider holds beyond its configuration (records, accounts, ledgers …)."""

    def inject(self, kind: str, **fault: Any) -> Fault:
        """Fail the next calls of ``kind`` ("*" for any); see :class:`Fault` for the options."""
        return self.state.inject(kind, **fault)

    def clear_faults(self) -> None:
        self.state.clear_faults()

    def count(self, kind: str = "*") -> int:
        """Calls of ``kind`` received ("*": every call)."""
        return self.state.count(kind)


class HttpSimulator(Simulator):
    """A simulator served over HTTP by the Litestar app :meth:`create_app` builds."""

    @abc.abstractmethod
    def create_app(self) -> Litestar:
        """The app answering the provider's API from this simulator's data."""


def restore_defaults(obj: Any, *names: str) -> None:
    """Set the dataclass fields ``names`` of ``obj`` back to their declared defaults."""
    declared = {f.name: f for f in fields(obj)}
    for name in names:
        default = declared[name]
        if default.default_factory is not MISSING:
            setattr(obj, name, default.default_factory())
        else:
            setattr(obj, name, default.default)


async def fault_response(fault: Fault) -> Response[Any]:
    if fault.delay_seconds:
        await asyncio.sleep(fault.delay_seconds)
    if fault.raw is not None:
        return Response(
            fault.raw, status_code=fault.status, headers=fault.headers, media_type=MediaType.TEXT
        )
    return Response(
        fault.body if fault.body is not None else {"error": {"message": "injected fault"}},
        status_code=fault.status,
        headers=fault.headers,
        media_type=MediaType.JSON,
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def simulator_app(route_handlers: Sequence[Any], **kwargs: Any) -> Litestar:
    """A simulator's Litestar app. ``logging_config=None`` matters: Litestar's default logging
    configuration replaces the root logger's handlers, which would drop the host process's secret
    masking and correlation ids the moment a simulator starts (the demo runs them in-process)."""
    return Litestar(route_handlers=list(route_handlers), debug=False, logging_config=None, **kwargs)


def _server(app: Any, port: int) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        access_log=False,
        # The process's logging (secret masking, correlation ids, LOG_LEVEL) belongs to the app.
        log_config=None,
        # A client holding a request open (a browser's poll, a slow test) must not keep the
        # server from stopping.
        timeout_graceful_shutdown=2,
        # Longer than a client leaves a kept connection idle between two requests: with
        # uvicorn's 5 s, a client sending on a connection the server was closing at that moment
        # heard "connection reset" (a browser test's request client, after a slow page).
        timeout_keep_alive=DEFAULT_HTTP_KEEP_ALIVE_SECONDS,
    )
    return uvicorn.Server(config)


@asynccontextmanager
async def serve_in_loop(
    app: Any, port: int | None = None, *, abandon_in_flight: bool = False
) -> AsyncIterator[str]:
    """Serve ``app`` inside the running event loop; yields its base URL. ``abandon_in_flight``:
    requests still being answered when it stops are cancelled at once instead of after the
    grace period (uvicorn cancels them then anyway)."""
    port = port or free_port()
    server = _server(app, port)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        if abandon_in_flight:
            for request in list(server.server_state.tasks):
                request.cancel()
        server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(task), 5)
        except TimeoutError:
            server.force_exit = True
            await task


class ThreadedServer:
    """Serve ``app`` from its own thread and event loop (for the demo, benchmarks, and tests
    whose own loop may be busy or whose workers run in other processes)."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = _server(app, self.port)
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"sandbox:{self.port}")

    def _run(self) -> None:
        asyncio.run(self._server.serve())

    def start(self) -> ThreadedServer:
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("sandbox server failed to start")
            threading.Event().wait(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> ThreadedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_simulator(simulator: HttpSimulator, port: int | None = None) -> ThreadedServer:
    """Serve ``simulator`` from its own thread on a loopback port; sets its ``url``."""
    server = ThreadedServer(simulator.create_app(), port=port)
    simulator.url = server.url
    return server.start()


@asynccontextmanager
async def simulator_in_loop(simulator: HttpSimulator) -> AsyncIterator[str]:
    """Serve ``simulator`` inside the running event loop; sets and yields its ``url``. When it
    stops, an answer it still holds back (a fault's delay, longer than its client waited) is
    abandoned rather than waited out for the server's grace period."""
    async with serve_in_loop(simulator.create_app(), abandon_in_flight=True) as url:
        simulator.url = url
        yield url


AppFactory = Callable[[SandboxState], Any]
