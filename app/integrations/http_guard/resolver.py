"""Name resolution for guarded requests, injectable so tests can make a name resolve anywhere.

A :class:`Resolver` returns every address a name has; an unknown name gives an empty list, a
temporary failure raises ``OSError``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping, Sequence
from typing import Protocol

from app.integrations.http_guard.addresses import IPAddress, parse_ip

# getaddrinfo's answers for "this name does not exist" (as opposed to "try again").
_NO_SUCH_NAME = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


class Resolver(Protocol):
    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        """Every address of ``host``; ``[]`` when it does not exist; ``OSError`` when unsure."""
        ...


class SystemResolver:
    """The operating system's resolver (``getaddrinfo``), run off the event loop by asyncio."""

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            if exc.errno in _NO_SUCH_NAME:
                return []
            raise
        out: list[IPAddress] = []
        for _family, _type, _proto, _name, sockaddr in infos:
            ip = parse_ip(str(sockaddr[0]).split("%", 1)[0])
            if ip is not None and ip not in out:
                out.append(ip)
        return out


class StaticResolver:
    """A fixed hosts table: names resolve only to what it lists (tests; pinned internal names)."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self._table: dict[str, list[IPAddress]] = {}
        for name, addresses in table.items():
            ips = [parse_ip(a) for a in addresses]
            if any(ip is None for ip in ips):
                raise ValueError(f"{name}: not an IP address in {addresses!r}")
            self._table[name.lower()] = [ip for ip in ips if ip is not None]

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        return list(self._table.get(host.lower().rstrip("."), []))
