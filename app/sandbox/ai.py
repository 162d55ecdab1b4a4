"""A loopback simulator of the OpenAI chat completions API (the ``ai_generate`` action).

``POST /v1/chat/completions`` with ``{"model", "messages": [{"role", "content"}], "max_tokens" |
"max_completion_tokens", "temperature"}`` and ``Authorization: Bearer <key>``; answers the
``chat.completion`` object (``choices[0].message.content``, ``finish_reason``, ``usage`` with
prompt, completion and total tokens). Errors use OpenAI's shape ``{"error": {"message", "type",
"param", "code"}}``: 401 ``invalid_api_key``, 404 ``model_not_found``, 400 for bad messages and
``context_length_exceeded``, 429 ``insufficient_quota`` once :attr:`AiSandbox.quota_tokens` is
spent (which waiting does not fix), 429 ``rate_limit_exceeded`` by injection.

Deterministic: the same model and messages always give the same text and token counts (tokens are
counted as one per four characters, plus four per message), so tests can assert exact usage. Like
OpenAI there is no idempotency key: every call is billed, which is why the engine caches results.
Structured output: a ``response_format`` is checked as OpenAI does (400 naming
``response_format``); a request for a funnel definition is answered with a graph chosen from the
description (valid, invalid then repaired, hopeless, garbage, refused: see
:mod:`app.sandbox.ai_graphs`). Fault kind: ``chat.completions``. :attr:`AiSandbox.lost` loses replies *after* the completion
was billed (a 502 or a reply later than the client waits), as a dropped connection does.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import threading
from dataclasses import dataclass, field
from typing import Any

from litestar import Litestar, MediaType, Request, Response, post

from app.clock import Clock, SystemClock
from app.sandbox import ai_graphs
from app.sandbox.base import (
    HttpSimulator,
    SandboxState,
    ThreadedServer,
    fault_response,
    restore_defaults,
    simulator_app,
    start_simulator,
)
from app.sandbox.payments import LostResponses

ROLES = frozenset({"system", "developer", "user", "assistant"})
CONTEXT_TOKENS = 8192


def count_tokens(text: str) -> int:
    """The simulator's tokenizer: one token per four characters, rounded up."""
    return math.ceil(len(text) / 4)


def prompt_tokens(messages: list[dict[str, str]]) -> int:
    return sum(count_tokens(m["content"]) + 4 for m in messages)


def openai_error(
    status: int, message: str, *, type_: str, code: str | None = None, param: str | None = None
) -> Response[Any]:
    return Response(
        {"error": {"message": message, "type": type_, "param": param, "code": code}},
        status_code=status,
        media_type=MediaType.JSON,
    )


@dataclass
class AiSandbox(HttpSimulator):
    """API keys, models and the quota it was built with (kept by :meth:`reset`); what was billed,
    every completion answered and the armed lost replies (forgotten by it)."""

    state: SandboxState = field(default_factory=SandboxState)
    api_keys: set[str] = field(default_factory=lambda: {"sk-sandbox-ai"})
    models: set[str] = field(default_factory=lambda: {"gpt-4o-mini", "sandbox-small"})
    quota_tokens: int | None = None
    """Tokens the account may spend in total; ``None`` for no limit (:meth:`reset` restores the
    quota it was built with)."""
    clock: Clock = field(default_factory=SystemClock)
    tokens_billed: int = 0
    completions: list[dict[str, Any]] = field(default_factory=list)
    """Every billed completion, including those whose reply was lost."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Every request body that passed authentication, as received."""
    lost: LostResponses = field(default_factory=LostResponses)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _built_quota: int | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        self._built_quota = self.quota_tokens

    def reset_data(self) -> None:
        with self._lock:
            self.quota_tokens = self._built_quota
            restore_defaults(self, "tokens_billed", "completions", "requests", "lost", "_ids")

    def create_app(self) -> Litestar:
        return create_ai_app(self)


def generate(model: str, messages: list[dict[str, str]]) -> str:
    """The deterministic "model": a reply naming the last user message and a digest of them all."""
    digest = hashlib.sha256(repr((model, messages)).encode()).hexdigest()[:8]
    last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    return f"[{digest}] {last_user}"


def _validate(body: Any) -> Response[Any] | None:
    if not isinstance(body, dict):
        return openai_error(400, "We could not parse the JSON body.", type_="invalid_request_error")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return openai_error(
            400, "[] is too short - 'messages'", type_="invalid_request_error", param="messages"
        )
    for index, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or message.get("role") not in ROLES
            or not isinstance(message.get("content"), str)
        ):
            return openai_error(
                400,
                f"Invalid value for 'messages[{index}]'.",
                type_="invalid_request_error",
                param=f"messages[{index}]",
            )
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        return openai_error(
            400,
            "max_tokens must be a positive integer",
            type_="invalid_request_error",
            param="max_tokens",
        )
    if (bad_format := ai_graphs.format_error(body)) is not None:
        return openai_error(400, bad_format, type_="invalid_request_error", param="response_format")
    return None


def _reply(
    model: str, messages: list[dict[str, str]], body: dict[str, Any]
) -> tuple[str | None, str | None, str, str]:
    """``(content, refusal, billed text, finish_reason)``: a graph for a structured-output
    request for a funnel definition, the deterministic text otherwise; cut at the token limit."""
    refusal: str | None = None
    content: str | None
    if ai_graphs.wants_graph(body):
        content, refusal = ai_graphs.answer(messages)
    else:
        content = generate(model, messages)
    text = content if content is not None else refusal or ""
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None and count_tokens(text) > limit:
        text = text[: limit * 4]
        return (text if content is not None else None), refusal, text, "length"
    return content, refusal, text, "stop"


def create_ai_app(sandbox: AiSandbox) -> Litestar:
    @post("/v1/chat/completions")
    async def complete(request: Request[Any, Any, Any]) -> Response[Any]:
        if (fault := sandbox.state.hit("chat.completions")) is not None:
            return await fault_response(fault)
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or key.strip() not in sandbox.api_keys:
            return openai_error(
                401,
                "Incorrect API key provided.",
                type_="invalid_request_error",
                code="invalid_api_key",
            )
        try:
            body = await request.json()
        except Exception:
            body = None
        if isinstance(body, dict):
            sandbox.requests.append(body)
        if (invalid := _validate(body)) is not None:
            return invalid
        model = body.get("model")
        if model not in sandbox.models:
            return openai_error(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                type_="invalid_request_error",
                code="model_not_found",
            )
        messages = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
        used_prompt = prompt_tokens(messages)
        if used_prompt > CONTEXT_TOKENS:
            return openai_error(
                400,
                f"This model's maximum context length is {CONTEXT_TOKENS} tokens.",
                type_="invalid_request_error",
                code="context_length_exceeded",
                param="messages",
            )
        content, refusal, text, finish = _reply(model, messages, body)
        usage = {
            "prompt_tokens": used_prompt,
            "completion_tokens": count_tokens(text),
            "total_tokens": used_prompt + count_tokens(text),
        }
        with sandbox._lock:
            if (
                sandbox.quota_tokens is not None
                and sandbox.tokens_billed + usage["total_tokens"] > sandbox.quota_tokens
            ):
                return openai_error(
                    429,
                    "You exceeded your current quota, please check your plan and billing details.",
                    type_="insufficient_quota",
                    code="insufficient_quota",
                )
            sandbox.tokens_billed += usage["total_tokens"]
            completion = {
                "id": f"chatcmpl-sandbox{next(sandbox._ids):010d}",
                "object": "chat.completion",
                "created": int(sandbox.clock.now().timestamp()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": content,
                            "refusal": refusal,
                        },
                        "logprobs": None,
                        "finish_reason": finish,
                    }
                ],
                "usage": usage,
                "system_fingerprint": "fp_sandbox",
            }
            sandbox.completions.append(completion)
        if (lost := await sandbox.lost.take()) is not None:
            return lost
        return Response(completion, media_type=MediaType.JSON)

    return simulator_app([complete])


def start_ai_sandbox(sandbox: AiSandbox | None = None) -> ThreadedServer:
    return start_simulator(sandbox or AiSandbox())
