"""SMS through a configurable HTTP provider (the ``send_sms`` action).

Two shapes, one interface (:class:`SmsSender`): :class:`JsonSmsClient` for a generic JSON provider
(``POST /v1/messages``, bearer key, ``Idempotency-Key``) and :class:`TwilioSmsClient` for the Twilio
Messages API (form-encoded, basic auth). How the deliverer calls either::

    receipt = await sender.send(
        SmsMessage(to=contact.phone, body=rendered_text),
        idempotency_key=outbox_row.idempotency_key,
        previously_attempted=outbox_row.attempts > 0,
    )
    outbox_row.provider_message_id = receipt.message_id

Errors: :class:`~app.integrations.http_guard.TransientError` → retry the row later (not before
``retry_after``) with ``previously_attempted=True``;
:class:`~app.integrations.http_guard.PermanentError` (invalid number, bad credentials) → mark the row
failed. Credentials come from workspace secrets; build one client per workspace account and keep it.
"""

from app.integrations.sms.generic import JsonSmsClient
from app.integrations.sms.message import SmsMessage, SmsReceipt, SmsSender
from app.integrations.sms.twilio import TwilioSmsClient

__all__ = ["JsonSmsClient", "SmsMessage", "SmsReceipt", "SmsSender", "TwilioSmsClient"]
