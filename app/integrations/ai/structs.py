"""The parts of an ``ai_generate`` node and of a completion the engine uses."""

from __future__ import annotations

from typing import Literal

import msgspec

Role = Literal["system", "developer", "user", "assistant"]


class ChatMessage(msgspec.Struct, frozen=True):
    role: Role
    content: str


class Creative(msgspec.Struct, frozen=True, kw_only=True):
    """What an ``ai_generate`` node asks for, before merge variables are filled in."""

    model: str
    prompt: str
    """The user prompt template, with merge variables unrendered."""
    system: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None


class TokenUsage(msgspec.Struct, frozen=True):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    model: str
    text: str
    finish_reason: str | None
    """``stop``, or ``length`` when ``max_tokens`` cut the text short."""
    usage: TokenUsage
