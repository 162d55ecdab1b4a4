"""Generation at send time through an OpenAI-compatible API (the ``ai_generate`` action).

How the executor uses it — ``variables_in``/``render`` being the engine's own template functions,
``cache`` and ``ledger`` its own tables::

    used = {name: contact_values[name] for name in variables_in(creative.prompt)}
    key = cache_key(creative, used)
    if (hit := await cache.get(key)) is not None:
        text = hit                                  # costs nothing, no quota decision
    else:
        messages = build_messages(creative, render(creative.prompt, used))
        decision = decide_quota(
            used_tokens=ledger.used(org), quota_tokens=org.ai_quota_tokens,
            estimated_tokens=estimate_tokens(messages, creative.max_tokens),
        )
        if not decision.allowed:
            ...                                     # record decision.reason, do not call
        completion = await chat.complete(
            messages, model=creative.model,
            max_tokens=creative.max_tokens, temperature=creative.temperature,
        )
        ledger.add(org, completion.usage.total_tokens); cache.put(key, completion.text)

Errors: :class:`~app.integrations.http_guard.TransientError` (rate limits, 5xx, timeouts) → retry
later; :class:`~app.integrations.http_guard.PermanentError` (bad key, unknown model, context too
long, the provider account out of credit: ``code == "insufficient_quota"``) → record and stop.
"""

from app.integrations.ai.cache import CACHE_KEY_VERSION, build_messages, cache_key
from app.integrations.ai.client import DEFAULT_BASE_URL, ChatClient
from app.integrations.ai.quota import (
    QuotaDecision,
    decide_quota,
    estimate_tokens,
    may_have_been_billed,
)
from app.integrations.ai.structs import ChatMessage, Completion, Creative, TokenUsage

__all__ = [
    "CACHE_KEY_VERSION",
    "DEFAULT_BASE_URL",
    "ChatClient",
    "ChatMessage",
    "Completion",
    "Creative",
    "QuotaDecision",
    "TokenUsage",
    "build_messages",
    "cache_key",
    "decide_quota",
    "estimate_tokens",
    "may_have_been_billed",
]
