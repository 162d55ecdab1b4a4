"""A loopback TCP proxy in front of the test Redis that a test stops and starts again on the
same port: stopping it refuses new connections and cuts the open ones, as a Redis that went
away does."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlparse


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed): a connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A loopback port whose listener accepts connections (the kernel completes them) and never
    reads or answers: a hung Redis."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


@contextlib.asynccontextmanager
async def proxy_to(url: str) -> AsyncIterator[Proxy]:
    """A started :class:`Proxy` in front of the Redis at ``url``, stopped at the end."""
    target = urlparse(url)
    made = Proxy(target.hostname or "127.0.0.1", target.port or 6379)
    await made.start()
    try:
        yield made
    finally:
        await made.stop()


class Proxy:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.target_port = port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._pipes: set[asyncio.Task[None]] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self.held = 0
        """Reads held back while frozen (a command, or its answer, waiting in the frozen Redis)."""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        """Listen (again) on the same port once it has one."""
        self._server = await asyncio.start_server(
            self._connected, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in self._writers:
            writer.transport.abort()
        self._writers.clear()
        for pipe in self._pipes:
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        self._pipes.clear()

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            pipe = asyncio.create_task(self._pipe(source, sink))
            self._pipes.add(pipe)
            pipe.add_done_callback(self._pipes.discard)

    def freeze(self) -> None:
        """Keep every connection open and pass nothing on, either way: a frozen Redis (stopped
        with SIGSTOP, a stalled network) that accepts commands and never answers."""
        self._flowing.clear()

    def thaw(self) -> None:
        """Pass bytes on again, those held while frozen first."""
        self._flowing.set()

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await source.read(65536):
                if not self._flowing.is_set():
                    self.held += 1
                await self._flowing.wait()
                sink.write(data)
                await sink.drain()
        sink.transport.abort()
