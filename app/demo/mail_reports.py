"""The demo's delivery reports: from the mailbox page, a person reports a received message as
bounced, complained about or opened the way SendGrid, Postmark or Mailgun would, and sees what the
report does (the address suppressed, the count on the message's node).

The providers' simulators build and sign each report and it is POSTed over HTTP to the
workspace's own receiver (``/hooks/funnels/{workspace}/{provider}``), which verifies it exactly as
it verifies the real providers. The simulators' keys are fixed demo values, so the secrets seeded
into the demo workspace once stay valid across restarts.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import httpx
from cryptography.hazmat.primitives.asymmetric import ec

from app.platform.service import set_secret
from app.sandbox.mailgun_webhooks import MailgunWebhook
from app.sandbox.postmark_webhooks import PostmarkWebhook
from app.sandbox.sendgrid_webhooks import SendGridEventWebhook
from app.sandbox.smtp import ReceivedMessage

if TYPE_CHECKING:
    from app.runtime import Runtime

PROVIDERS = ("sendgrid", "postmark", "mailgun")
KINDS = ("bounced", "complained", "opened")


def _demo_ec_key() -> ec.EllipticCurvePrivateKey:
    seed = int.from_bytes(hashlib.sha256(b"sweepline demo sendgrid").digest(), "big")
    return ec.derive_private_key(seed % (2**255), ec.SECP256R1())


SENDGRID = SendGridEventWebhook(key=_demo_ec_key())
POSTMARK = PostmarkWebhook(username="demo", password="demo-postmark-webhook-password")  # noqa: S106
MAILGUN = MailgunWebhook(signing_key="demo-mailgun-webhook-signing-key")


async def configure_report_secrets(runtime: Runtime, workspace_id: int) -> None:
    """The workspace's secrets for the three providers' receivers, matching the simulators."""
    values = {
        "funnels.sendgrid.verification_key": SENDGRID.verification_key,
        "funnels.postmark.basic_auth": POSTMARK.basic_auth,
        "funnels.mailgun.signing_key": MAILGUN.signing_key,
    }
    async with runtime.db.write() as uow:
        for name, value in values.items():
            await set_secret(
                uow.session,
                runtime.secrets,
                workspace_id=workspace_id,
                name=name,
                value=value,
                now=runtime.clock.now(),
            )


def _request(provider: str, kind: str, message: ReceivedMessage) -> tuple[bytes, dict[str, str]]:
    to, mid = message.to[0], message.message_id
    if provider == "sendgrid":
        names = {"bounced": "bounce", "complained": "spamreport", "opened": "open"}
        return SENDGRID.signed([SENDGRID.event(names[kind], to, mid)])
    if provider == "postmark":
        metadata = POSTMARK.metadata_of(message.raw)
        record = {
            "bounced": lambda: POSTMARK.bounce(to, metadata=metadata),
            "complained": lambda: POSTMARK.spam_complaint(to, metadata=metadata),
            "opened": lambda: POSTMARK.open(to, metadata=metadata),
        }[kind]()
        return POSTMARK.request(record)
    names = {"bounced": "failed", "complained": "complained", "opened": "opened"}
    body = MAILGUN.signed(MAILGUN.event(names[kind], to, mid))
    return json.dumps(body).encode(), {"Content-Type": "application/json"}


async def send_report(
    client: httpx.AsyncClient, workspace_id: int, provider: str, kind: str, message: ReceivedMessage
) -> dict[str, Any]:
    """Post one report about ``message`` to the workspace's receiver for ``provider`` (``client``
    is based at the app); the receiver's answer."""
    if provider not in PROVIDERS or kind not in KINDS:
        raise ValueError(f"unknown provider or kind: {provider} {kind}")
    body, headers = _request(provider, kind, message)
    url = f"/hooks/funnels/{workspace_id}/{provider}"
    answer = await client.post(url, content=body, headers=headers)
    result: dict[str, Any] = {"status": answer.status_code, **answer.json()}
    return result
