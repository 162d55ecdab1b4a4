"""Paper letters through a configurable print-and-mail HTTP provider (the ``send_letter`` action).

How the deliverer calls it (one :class:`JsonLetterClient` per provider account, key from the
workspace's secrets)::

    receipt = await letters.send(
        Letter(to=PostalAddress(name=…, line1=…, city=…, postal_code=…, country="DE"),
               content=rendered_html),
        idempotency_key=outbox_row.idempotency_key,
    )
    outbox_row.provider_message_id = receipt.letter_id   # receipt.expected_delivery_date too

A redelivered effect with the same key is recognised by the provider (one letter printed).
:class:`~app.integrations.http_guard.TransientError` → retry the row later with the same key;
:class:`~app.integrations.http_guard.PermanentError` (an incomplete address, a bad key) → failed.
"""

from app.integrations.letter.client import JsonLetterClient, Letter, LetterReceipt, PostalAddress

__all__ = ["JsonLetterClient", "Letter", "LetterReceipt", "PostalAddress"]
