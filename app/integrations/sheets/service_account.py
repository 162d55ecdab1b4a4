"""Access tokens for a Google service account, for the Sheets API (and other Google APIs read
with the same key, such as Search Console, each with its own scope).

A service account's JSON key (``client_email`` and an RSA ``private_key``) signs a JWT with RS256
(Google's "two-legged OAuth": ``iss`` the account, ``scope`` read-only Sheets, ``aud`` the token
endpoint, one hour at most), which the token endpoint exchanges for a bearer token
(``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer``). :class:`TokenMinter` caches each
account's token until shortly before it expires, so a run reading many sheets mints once. The token
endpoint's URL is configurable (a loopback simulator in tests and the demo).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
import msgspec
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from app.integrations.http_guard import (
    ClientOptions,
    classify_exception,
    is_transient_status,
    outbound_client,
)
from app.integrations.http_guard.user_agent import USER_AGENT
from app.integrations.sheets.client import BearerToken, SheetsError

SERVICE_ACCOUNT_SECRET = "google_service_account_key"  # noqa: S105 - a secret's name
"""The workspace secret holding a service account's JSON key: every Google API the workspace
reads with it (Sheets custom metrics, Search Console keywords) mints its tokens from this one."""
SCOPE = "https://www.googleapis.com/auth/spreadsheets.readonly"
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ASSERTION_LIFETIME = timedelta(hours=1)
"""The longest validity Google accepts for the signed assertion."""
REFRESH_BEFORE = timedelta(minutes=5)
"""A cached token is replaced this long before it expires (a read must not outlive it)."""


class ServiceAccountKey(msgspec.Struct, frozen=True):
    """The fields of a service account's JSON key the product uses (the rest are ignored)."""

    client_email: str
    private_key: str
    private_key_id: str = ""
    type: str = "service_account"

    def __repr__(self) -> str:  # keep the private key out of logs and tracebacks
        return f"ServiceAccountKey(client_email={self.client_email!r})"


def parse_key(raw: str) -> ServiceAccountKey:
    """Decode a JSON key; a key that is not a service account's RSA key is a permanent error."""
    try:
        key = msgspec.json.decode(raw, type=ServiceAccountKey)
    except msgspec.DecodeError:
        raise SheetsError("the service-account key is not a JSON key file") from None
    if key.type != "service_account" or "@" not in key.client_email:
        raise SheetsError("the JSON key is not a service account's key")
    _private_key(key)
    return key


def _private_key(key: ServiceAccountKey) -> rsa.RSAPrivateKey:
    try:
        loaded = serialization.load_pem_private_key(key.private_key.encode(), password=None)
    except (ValueError, TypeError):
        raise SheetsError("the service-account key's private_key is not a PEM key") from None
    if not isinstance(loaded, rsa.RSAPrivateKey):
        raise SheetsError("the service-account key's private_key is not an RSA key")
    return loaded


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signed_assertion(
    key: ServiceAccountKey, *, audience: str, issued_at: datetime, scope: str = SCOPE
) -> str:
    """The RS256-signed JWT the token endpoint exchanges for an access token."""
    header = {"alg": "RS256", "typ": "JWT"}
    if key.private_key_id:
        header["kid"] = key.private_key_id
    iat = int(issued_at.timestamp())
    claims = {
        "iss": key.client_email,
        "scope": scope,
        "aud": audience,
        "iat": iat,
        "exp": iat + int(ASSERTION_LIFETIME.total_seconds()),
    }
    signing_input = f"{_b64(msgspec.json.encode(header))}.{_b64(msgspec.json.encode(claims))}"
    signature = _private_key(key).sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64(signature)}"


class _TokenReply(msgspec.Struct):
    access_token: str
    expires_in: int = 3600
    token_type: str = "Bearer"  # noqa: S105 - the scheme's name, not a secret


class _TokenError(msgspec.Struct):
    error: str = ""
    error_description: str = ""


@dataclass(frozen=True, slots=True)
class _Cached:
    token: BearerToken
    expires_at: datetime


class TokenMinter:
    """Mints and caches service-account access tokens; one per process, closed with :meth:`aclose`."""

    def __init__(
        self,
        token_url: str,
        *,
        now: Callable[[], datetime],
        timeout_seconds: float = 30.0,
        user_agent: str = USER_AGENT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.token_url = token_url
        self._now = now
        # The token endpoint is the operator's setting, never a workspace's: no address guard.
        self._http = outbound_client(
            provider="google_oauth",
            options=ClientOptions(timeout_seconds=timeout_seconds, user_agent=user_agent),
            transport=transport,
        )
        self._cache: dict[str, _Cached] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def bearer(self, key: ServiceAccountKey, scope: str = SCOPE) -> BearerToken:
        """A valid access token for ``key`` and ``scope``: the cached one, or a freshly minted
        one (other Google APIs read with the same key, e.g. Search Console, ask another scope)."""
        # The private key is part of the cache key: a rotated key never reuses the old token.
        # So is the scope: a Sheets token cannot read Search Console, nor the other way round.
        slot = hashlib.sha256(
            f"{key.client_email}\n{key.private_key}\n{scope}".encode()
        ).hexdigest()
        lock = self._locks.setdefault(slot, asyncio.Lock())
        async with lock:  # concurrent reads of one account mint once
            cached = self._cache.get(slot)
            if cached is not None and self._now() < cached.expires_at - REFRESH_BEFORE:
                return cached.token
            fresh = await self._mint(key, scope)
            self._cache[slot] = fresh
            return fresh.token

    async def _mint(self, key: ServiceAccountKey, scope: str) -> _Cached:
        issued_at = self._now()
        assertion = signed_assertion(key, audience=self.token_url, issued_at=issued_at, scope=scope)
        try:
            response = await self._http.post(
                self.token_url, data={"grant_type": GRANT_TYPE, "assertion": assertion}
            )
        except httpx.TransportError as exc:
            raise SheetsError(
                f"could not reach the Google token endpoint: {exc!r}",
                transient=classify_exception(exc).transient,
            ) from None
        if response.status_code != 200:
            try:
                detail = msgspec.json.decode(response.content, type=_TokenError)
                message = f"{detail.error}: {detail.error_description}".strip(": ")
            except msgspec.DecodeError:
                message = f"HTTP {response.status_code}"
            raise SheetsError(
                f"Google refused the service account {key.client_email}: {message}",
                status=response.status_code,
                transient=is_transient_status(response.status_code),
            )
        try:
            reply = msgspec.json.decode(response.content, type=_TokenReply)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise SheetsError(f"unexpected reply from the Google token endpoint: {exc}") from None
        return _Cached(
            BearerToken(reply.access_token), issued_at + timedelta(seconds=reply.expires_in)
        )

    async def aclose(self) -> None:
        await self._http.aclose()


@dataclass(frozen=True, slots=True)
class ServiceAccount:
    """Sheets credentials from a service account's JSON key, turned into a bearer token (minted
    through ``minter``, cached) when a read needs one."""

    key_json: str
    minter: TokenMinter
    scope: str = SCOPE

    async def bearer(self) -> BearerToken:
        return await self.minter.bearer(parse_key(self.key_json), self.scope)

    def __repr__(self) -> str:
        return "ServiceAccount(***)"
