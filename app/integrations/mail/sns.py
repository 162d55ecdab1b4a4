"""Amazon SNS messages (how Amazon SES reports bounces, complaints and deliveries): signature
verification and subscription confirmation.

A message is trusted only when (1) its ``SigningCertURL`` matches the allowed pattern (by default
``https://sns.<region>.amazonaws.com/…``, so an attacker cannot point us at their own
certificate), (2) the RSA signature over the canonical string (SignatureVersion 1: SHA1,
2: SHA256) verifies with that certificate's key, and (3) the caller checks its ``TopicArn`` is
one the workspace configured: the signature only proves the message came from *some* SNS topic,
and anyone can subscribe our URL to a topic of their own.
"""

from __future__ import annotations

import base64
import re
from typing import Any

import httpx
import msgspec
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from app.clock import Clock, SystemClock
from app.integrations.http_guard.classify import classify_exception, is_transient_status
from app.integrations.http_guard.client import ClientOptions, outbound_client
from app.integrations.http_guard.errors import OutboundError
from app.integrations.http_guard.user_agent import USER_AGENT

PROVIDER = "sns"

DEFAULT_URL_PATTERN = r"^https://sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/"
CERT_CACHE_SECONDS = 3600.0

_NOTIFICATION_FIELDS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
_CONFIRMATION_FIELDS = (
    "Message",
    "MessageId",
    "SubscribeURL",
    "Timestamp",
    "Token",
    "TopicArn",
    "Type",
)


class SnsMessage(msgspec.Struct, kw_only=True, rename="pascal"):
    type: str
    message_id: str
    topic_arn: str
    message: str
    timestamp: str
    signature_version: str
    signature: str
    signing_cert_url: str = msgspec.field(name="SigningCertURL")
    subject: str | None = None
    subscribe_url: str | None = msgspec.field(default=None, name="SubscribeURL")
    token: str | None = None

    def field(self, name: str) -> str | None:
        return {
            "Message": self.message,
            "MessageId": self.message_id,
            "Subject": self.subject,
            "Timestamp": self.timestamp,
            "TopicArn": self.topic_arn,
            "Type": self.type,
            "SubscribeURL": self.subscribe_url,
            "Token": self.token,
        }[name]


class SnsError(OutboundError):
    """The message is not a verifiable SNS message, or SNS could not be reached to verify or
    confirm it (the receiver answers 401/422).

    Permanent unless fetching the certificate or confirming the subscription failed in a way the
    classifier calls transient (SNS then delivers the message again).
    """

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False) -> None:
        super().__init__(message, provider=PROVIDER, status=status)
        self.transient = transient

    def __str__(self) -> str:
        return self.message


def string_to_sign(message: SnsMessage) -> bytes:
    """The canonical ``name\\nvalue\\n`` lines SNS signs (fields absent from the message are
    left out, e.g. a notification without ``Subject``)."""
    fields = _NOTIFICATION_FIELDS if message.type == "Notification" else _CONFIRMATION_FIELDS
    lines: list[str] = []
    for name in fields:
        value = message.field(name)
        if value is not None:
            lines += [name, value]
    return ("\n".join(lines) + "\n").encode()


def decode(body: bytes) -> SnsMessage:
    try:
        return msgspec.json.decode(body, type=SnsMessage)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise SnsError(f"not an SNS message: {exc}") from None


def verify_with(message: SnsMessage, certificate_pem: bytes) -> None:
    """Raise :class:`SnsError` unless ``message`` is signed by the certificate's key."""
    algorithms = {"1": hashes.SHA1(), "2": hashes.SHA256()}  # noqa: S303 - SNS v1 is SHA1
    algorithm = algorithms.get(message.signature_version)
    if algorithm is None:
        raise SnsError(f"unknown SignatureVersion {message.signature_version!r}")
    try:
        key = x509.load_pem_x509_certificate(certificate_pem).public_key()
        signature = base64.b64decode(message.signature, validate=True)
    except ValueError as exc:
        raise SnsError(f"unusable certificate or signature: {exc}") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise SnsError("the signing certificate does not hold an RSA key")
    try:
        key.verify(signature, string_to_sign(message), padding.PKCS1v15(), algorithm)
    except InvalidSignature:
        raise SnsError("the SNS signature does not verify") from None


class SnsVerifier:
    """Fetches signing certificates (only from URLs matching ``url_pattern``, cached) and
    verifies messages; confirms subscriptions by visiting their ``SubscribeURL``."""

    def __init__(
        self,
        *,
        url_pattern: str = DEFAULT_URL_PATTERN,
        timeout: float = 10.0,
        user_agent: str = USER_AGENT,
        clock: Clock | None = None,
    ) -> None:
        self.url_pattern = re.compile(url_pattern)
        self.timeout = timeout
        self.user_agent = user_agent
        self._certificates: dict[str, tuple[bytes, float]] = {}
        self._clock: Clock = clock or SystemClock()

    def _client(self) -> httpx.AsyncClient:
        # The one outbound core (user agent, no redirects, no proxy from the environment). The
        # URLs come from the message itself, so only those matching ``url_pattern`` (SNS's own
        # hosts) are ever fetched; the pattern, not the address guard, is what limits them.
        return outbound_client(
            provider=PROVIDER,
            options=ClientOptions(timeout_seconds=self.timeout, user_agent=self.user_agent),
        )

    def _allowed(self, url: str | None) -> str:
        if not url or not self.url_pattern.match(url):
            raise SnsError(f"URL not allowed for SNS: {url!r}")
        return url

    async def _certificate(self, url: str) -> bytes:
        hit = self._certificates.get(url)
        if hit is not None and hit[1] > self._clock.monotonic():
            return hit[0]
        try:
            async with self._client() as client:
                response = await client.get(url)
        except httpx.HTTPError as exc:
            raise SnsError(
                f"the signing certificate could not be fetched: {exc}",
                transient=classify_exception(exc).transient,
            ) from None
        if response.status_code != 200 or len(response.content) > 65536:
            raise _refused("the signing certificate could not be fetched", response)
        self._certificates[url] = (response.content, self._clock.monotonic() + CERT_CACHE_SECONDS)
        return response.content

    async def verify(self, body: bytes) -> SnsMessage:
        message = decode(body)
        verify_with(message, await self._certificate(self._allowed(message.signing_cert_url)))
        return message

    async def confirm(self, message: SnsMessage) -> None:
        """Confirm a verified ``SubscriptionConfirmation`` (SNS then starts delivering)."""
        url = self._allowed(message.subscribe_url)
        try:
            async with self._client() as client:
                response = await client.get(url)
        except httpx.HTTPError as exc:
            raise SnsError(
                f"the subscription could not be confirmed: {exc}",
                transient=classify_exception(exc).transient,
            ) from None
        if response.status_code != 200:
            raise _refused("the subscription could not be confirmed", response)


def _refused(what: str, response: httpx.Response) -> SnsError:
    status = response.status_code
    return SnsError(f"{what} ({status})", status=status, transient=is_transient_status(status))


def ses_event(message: SnsMessage) -> dict[str, Any]:
    """The SES notification or event carried by an SNS ``Notification``."""
    try:
        value = msgspec.json.decode(message.message.encode())
    except msgspec.DecodeError:
        raise SnsError("the SNS message does not carry an SES notification") from None
    if not isinstance(value, dict):
        raise SnsError("the SNS message does not carry an SES notification")
    return value
