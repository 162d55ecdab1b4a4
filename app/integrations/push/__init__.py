"""Push notifications through a configurable HTTP provider (the ``send_push`` action).

How the deliverer calls it (one :class:`JsonPushClient` per provider account, key from the
workspace's secrets)::

    try:
        receipt = await push.send(
            PushNotification(device_token=token, title=rendered_title, body=rendered_body),
            idempotency_key=outbox_row.idempotency_key,
        )
    except DeviceUnregistered:
        ...  # forget the token; the row is failed for good

The provider recognises a redelivered effect by its idempotency key, so retrying a row after a
:class:`~app.integrations.http_guard.TransientError` never shows the notification twice;
other :class:`~app.integrations.http_guard.PermanentError` s mark the row failed.
"""

from app.integrations.push.client import (
    DeviceUnregistered,
    JsonPushClient,
    PushNotification,
    PushReceipt,
)

__all__ = ["DeviceUnregistered", "JsonPushClient", "PushNotification", "PushReceipt"]
