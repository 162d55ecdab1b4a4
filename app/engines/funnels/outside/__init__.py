"""The actions that reach outside the building: ``send_sms``, ``send_push``, ``send_letter``,
``notify_team``, ``http_request``, ``create_payment``, ``book_slot`` and ``ai_generate``.

Their node executors (:mod:`.executors`) only write outbox effects; the deliverer sends them after
commit through the channels of :mod:`.channels`, with each workspace's provider configuration
(:mod:`.config`) and, for ``ai_generate``, the organisation's quota and the cache
(:mod:`.ai_ledger`).
"""
