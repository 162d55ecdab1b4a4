"""Client of an OpenAI-compatible chat completions API: ``POST {base}/v1/chat/completions``.

Works with OpenAI itself (base ``https://api.openai.com``) and the servers that copy its shape. The
API has no idempotency key, so every call is billed: the engine caches results under
:func:`~app.integrations.ai.cache.cache_key` and meters ``usage.total_tokens``. A 429 whose code is
``insufficient_quota`` is permanent (the account is out of credit); other 429s and 5xx are
transient and retried, honouring ``Retry-After``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import msgspec

from app.clock import Clock
from app.integrations.ai.structs import ChatMessage, Completion, TokenUsage
from app.integrations.http_guard import (
    AddressGuard,
    InvalidResponse,
    ProviderHttp,
    RetryPolicy,
    decode,
)
from app.integrations.http_guard.user_agent import USER_AGENT

PROVIDER = "openai"
DEFAULT_BASE_URL = "https://api.openai.com"


class _Message(msgspec.Struct, frozen=True):
    content: str | None = None
    refusal: str | None = None
    """Set instead of ``content`` when the model declines a structured-output request."""


class _Choice(msgspec.Struct, frozen=True):
    message: _Message
    finish_reason: str | None = None


class _Response(msgspec.Struct, frozen=True):
    id: str
    model: str
    choices: list[_Choice]
    usage: TokenUsage


class ChatClient:
    def __init__(
        self,
        *,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = 60.0,
        user_agent: str = USER_AGENT,
        policy: RetryPolicy | None = None,
        clock: Clock | None = None,
        guard: AddressGuard | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = ProviderHttp(
            provider=PROVIDER,
            base_url=base_url,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
            user_agent=user_agent,
            policy=policy,
            permanent_codes=frozenset({"insufficient_quota"}),
            clock=clock,
            guard=guard,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        max_tokens: int | None = None,
        temperature: float | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        """One completion. ``response_format`` asks for structured output (``{"type":
        "json_schema", "json_schema": {"name", "schema", "strict"}}``): the answer's text is then
        the JSON document, and a model that declines says so in ``refusal`` (an
        :class:`InvalidResponse` naming it)."""
        payload: dict[str, Any] = {"model": model, "messages": msgspec.to_builtins(messages)}
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if temperature is not None:
            payload["temperature"] = temperature
        if response_format is not None:
            payload["response_format"] = response_format
        response = await self._http.send("POST", "/v1/chat/completions", json=payload)
        raw = decode(response, _Response, provider=PROVIDER)
        if raw.choices and raw.choices[0].message.refusal:
            raise InvalidResponse(
                f"the model declined: {raw.choices[0].message.refusal}", provider=PROVIDER
            )
        if not raw.choices or raw.choices[0].message.content is None:
            raise InvalidResponse("the completion has no text", provider=PROVIDER)
        choice = raw.choices[0]
        return Completion(
            id=raw.id,
            model=raw.model,
            text=choice.message.content or "",
            finish_reason=choice.finish_reason,
            usage=raw.usage,
        )
