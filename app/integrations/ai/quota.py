"""Whether a generation fits the organisation's token quota (pure).

The engine keeps the ledger (tokens used in the current period); this decides before the call,
from an upper bound of what the call can cost, so a generation never takes the organisation past
its quota. A cache hit costs nothing and needs no decision. After the call the engine records
``completion.usage.total_tokens`` (the real cost, at most the estimate).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from app.integrations.ai.structs import ChatMessage
from app.integrations.http_guard import NOT_SENT, OutboundError, is_client_error

DEFAULT_COMPLETION_TOKENS = 1024
"""Assumed length of an answer whose ``max_tokens`` is not set."""
_PER_MESSAGE = 4


class QuotaDecision(msgspec.Struct, frozen=True, kw_only=True):
    allowed: bool
    reason: str | None = None
    """``no_quota``, ``exhausted`` or ``would_exceed`` when refused."""
    remaining_tokens: int | None = None
    """Tokens left in the period; ``None`` when unlimited."""


def estimate_tokens(messages: Sequence[ChatMessage], max_tokens: int | None) -> int:
    """A generous upper bound of a call's cost: about one token per three characters of prompt
    (tokenisers average three to four) plus the whole completion allowance."""
    prompt = sum(math.ceil(len(m.content) / 3) + _PER_MESSAGE for m in messages)
    return prompt + (max_tokens if max_tokens is not None else DEFAULT_COMPLETION_TOKENS)


def decide_quota(
    *, used_tokens: int, quota_tokens: int | None, estimated_tokens: int
) -> QuotaDecision:
    """Allow the call only if ``used + estimated`` stays within ``quota`` (``None``: unlimited)."""
    if quota_tokens is None:
        return QuotaDecision(allowed=True)
    remaining = max(0, quota_tokens - used_tokens)
    if quota_tokens <= 0:
        return QuotaDecision(allowed=False, reason="no_quota", remaining_tokens=0)
    if remaining == 0:
        return QuotaDecision(allowed=False, reason="exhausted", remaining_tokens=0)
    if estimated_tokens > remaining:
        return QuotaDecision(allowed=False, reason="would_exceed", remaining_tokens=remaining)
    return QuotaDecision(allowed=True, remaining_tokens=remaining)


def may_have_been_billed(error: BaseException) -> bool:
    """Whether a call that failed may still have been billed by the provider.

    A chat completion is billed once the model ran, whether or not its reply reaches us. So only
    a failure that proves the model did not run is free: the connection never opened
    (``not_sent``) or the provider refused the request with a 4xx (bad request, bad key, unknown
    model, rate limit). A reply lost on the way back — a timeout, a dropped connection, a 5xx from
    a gateway in between, a 2xx body that is not a completion — may have been billed, and counts.
    """
    if isinstance(error, OutboundError):
        if error.code == NOT_SENT:
            return False
        if error.status is not None and is_client_error(error.status):
            return False
    return True
