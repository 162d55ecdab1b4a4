"""A loopback Amazon SNS for SES delivery reports: it signs messages the way SNS does and serves
what a receiver fetches from SNS (the signing certificate, the SubscribeURL).

``SnsSandbox`` holds an RSA key and a self-signed certificate; :meth:`notification` and
:meth:`subscription_confirmation` build messages in SNS's JSON shape (``Type``, ``MessageId``,
``TopicArn``, ``Message``, ``Timestamp``, ``SignatureVersion`` 1 or 2, ``Signature``,
``SigningCertURL``, ``UnsubscribeURL``; ``Subject`` only when given), signed over SNS's canonical
string. Quirks kept: the ``Message`` of an SES notification is itself a JSON *string*; SNS posts
with ``Content-Type: text/plain; charset=UTF-8``; a notification has no ``Subject`` unless the
publisher set one, and then it is part of the signed string.

Fault kinds: ``certificate`` (the signing certificate's fetch), ``action.<Action>`` (the
SubscribeURL's ``ConfirmSubscription``).
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID
from litestar import Litestar, MediaType, Request, Response, get

from app.clock import Clock, SystemClock
from app.integrations.mail.sns import SnsMessage, string_to_sign
from app.sandbox.base import (
    HttpSimulator,
    SandboxState,
    ThreadedServer,
    fault_response,
    simulator_app,
    start_simulator,
)

SNS_CONTENT_TYPE = "text/plain; charset=UTF-8"


def _certificate(key: rsa.RSAPrivateKey) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.sandbox.amazonaws.com")])
    start = datetime(2020, 1, 1, tzinfo=UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(start)
        .not_valid_after(start + timedelta(days=36500))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class SnsSandbox(HttpSimulator):
    """The signing keys (kept by :meth:`reset`) and the subscriptions confirmed (forgotten)."""

    state: SandboxState = field(default_factory=SandboxState)
    clock: Clock = field(default_factory=SystemClock)
    url: str = ""
    """Set when the server starts (``start_sns_sandbox``)."""
    confirmed: list[str] = field(default_factory=list)
    """Tokens of subscriptions a receiver confirmed."""

    def __post_init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.certificate = _certificate(self.key)
        # A second key, to forge messages signed by a certificate SNS never issued.
        self.other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def reset_data(self) -> None:
        self.confirmed.clear()

    def create_app(self) -> Litestar:
        return create_sns_app(self)

    def _timestamp(self) -> str:
        return self.clock.now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    def _signed(self, fields: dict[str, Any], *, version: str, forged: bool) -> dict[str, Any]:
        fields = {
            **fields,
            "SignatureVersion": version,
            "SigningCertURL": f"{self.url}/SimpleNotificationService-sandbox.pem",
            "Signature": "",
        }
        message = SnsMessage(
            type=fields["Type"],
            message_id=fields["MessageId"],
            topic_arn=fields["TopicArn"],
            message=fields["Message"],
            timestamp=fields["Timestamp"],
            signature_version=version,
            signature="",
            signing_cert_url=fields["SigningCertURL"],
            subject=fields.get("Subject"),
            subscribe_url=fields.get("SubscribeURL"),
            token=fields.get("Token"),
        )
        algorithm = hashes.SHA1() if version == "1" else hashes.SHA256()  # noqa: S303
        key = self.other_key if forged else self.key
        signature = key.sign(string_to_sign(message), padding.PKCS1v15(), algorithm)
        fields["Signature"] = base64.b64encode(signature).decode()
        return fields

    def notification(
        self,
        topic_arn: str,
        event: dict[str, Any],
        *,
        subject: str | None = None,
        version: str = "1",
        forged: bool = False,
    ) -> bytes:
        """An SNS ``Notification`` carrying ``event`` (an SES notification) as its Message."""
        fields: dict[str, Any] = {
            "Type": "Notification",
            "MessageId": str(uuid.uuid4()),
            "TopicArn": topic_arn,
            "Message": json.dumps(event),
            "Timestamp": self._timestamp(),
            "UnsubscribeURL": f"{self.url}/?Action=Unsubscribe",
        }
        if subject is not None:
            fields["Subject"] = subject
        return json.dumps(self._signed(fields, version=version, forged=forged)).encode()

    def subscription_confirmation(self, topic_arn: str, *, version: str = "1") -> bytes:
        token = uuid.uuid4().hex
        fields = {
            "Type": "SubscriptionConfirmation",
            "MessageId": str(uuid.uuid4()),
            "Token": token,
            "TopicArn": topic_arn,
            "Message": f"You have chosen to subscribe to the topic {topic_arn}.",
            "SubscribeURL": f"{self.url}/?Action=ConfirmSubscription&Token={token}",
            "Timestamp": self._timestamp(),
        }
        return json.dumps(self._signed(fields, version=version, forged=False)).encode()


def create_sns_app(sandbox: SnsSandbox) -> Litestar:
    @get("/SimpleNotificationService-sandbox.pem")
    async def certificate() -> Response[Any]:
        if (fault := sandbox.state.hit("certificate")) is not None:
            return await fault_response(fault)
        return Response(sandbox.certificate, media_type="application/x-pem-file")

    @get("/")
    async def action(request: Request[Any, Any, Any]) -> Response[Any]:
        action, token = request.query_params.get("Action"), request.query_params.get("Token")
        if (fault := sandbox.state.hit(f"action.{action}")) is not None:
            return await fault_response(fault)
        if action == "ConfirmSubscription" and token:
            sandbox.confirmed.append(token)
            return Response(
                "<ConfirmSubscriptionResponse/>", media_type=MediaType.XML, status_code=200
            )
        return Response("<ErrorResponse/>", media_type=MediaType.XML, status_code=400)

    return simulator_app([certificate, action])


def start_sns_sandbox(sandbox: SnsSandbox | None = None) -> tuple[SnsSandbox, ThreadedServer]:
    sandbox = sandbox or SnsSandbox()
    return sandbox, start_simulator(sandbox)
