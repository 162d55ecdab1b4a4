"""Outbound clients share the process's one TLS context (building one loads every trusted root:
tens of milliseconds of CPU a client), and sharing it weakens nothing: a server whose certificate
no trusted root signed is refused, by plain and guarded clients alike."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from app.integrations.http_guard.address_guard import AddressGuard
from app.integrations.http_guard.client import outbound_client
from app.integrations.http_guard.errors import OutboundError
from app.integrations.http_guard.guard import GuardedHttp, HttpRequest
from app.integrations.http_guard.retry import NO_RETRY
from app.integrations.http_guard.tls import tls_context


def _self_signed(folder: Path) -> ssl.SSLContext:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    return context


@pytest.fixture
async def untrusted_server(tmp_path: Path) -> AsyncIterator[tuple[str, list[bytes]]]:
    """An HTTPS server on loopback with a self-signed certificate; the list holds every request
    line that reached it (none should)."""
    seen: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            seen.append(await reader.readline())
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
            await writer.drain()
        except (ssl.SSLError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=_self_signed(tmp_path))
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"https://localhost:{port}/", seen


def _pool_context(client: httpx.AsyncClient) -> object:
    # httpx keeps the transport's connection pool, and httpcore the pool's TLS context, on
    # private attributes: the only place to read which context a client verifies with.
    return client._transport._pool._ssl_context  # type: ignore[attr-defined]


async def test_every_outbound_client_verifies_with_the_one_context() -> None:
    guard = AddressGuard(allow_private=True)
    clients = [
        outbound_client(provider="plain"),
        outbound_client(provider="another"),
        outbound_client(provider="guarded", guard=guard),
    ]
    try:
        assert {id(_pool_context(client)) for client in clients} == {id(tls_context())}
        assert tls_context().verify_mode == ssl.CERT_REQUIRED
        assert tls_context().check_hostname
    finally:
        for client in clients:
            await client.aclose()


async def test_a_certificate_no_trusted_root_signed_is_refused(
    untrusted_server: tuple[str, list[bytes]],
) -> None:
    url, seen = untrusted_server
    guard = AddressGuard(allow_private=True)
    for client in (
        outbound_client(provider="plain"),
        outbound_client(provider="guarded", guard=guard),
    ):
        async with client:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get(url)
    action = GuardedHttp(guard=guard, timeout=5, policy=NO_RETRY)
    try:
        with pytest.raises(OutboundError) as refused:
            await action.request(HttpRequest(method="GET", url=url), allow_private=True)
        assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value.__cause__)
    finally:
        await action.aclose()
    assert seen == []
