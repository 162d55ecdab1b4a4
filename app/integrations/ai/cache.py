"""The cache key of an ``ai_generate`` result (pure).

A result depends on the creative (model, prompt template, system prompt, limits) and on the values
of the contact attributes the template used — nothing else, so two contacts whose used attributes
are equal share a result, and a repeated send does not pay again. The key is a hash: it can be
stored and indexed without keeping the attributes twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import msgspec

from app.integrations.ai.structs import ChatMessage, Creative

CACHE_KEY_VERSION = 1
"""Bumped when what goes into the key changes, so old entries stop matching instead of lying."""


def cache_key(creative: Creative, attributes_used: Mapping[str, Any]) -> str:
    """``ai1:<sha256>`` of the creative and the used attributes.

    Args:
        creative: The node's creative, templates unrendered.
        attributes_used: Exactly the merge variables the template referenced, with the values
            substituted (strings, numbers, booleans, dates or ``None``). Attributes the template
            does not use must be left out, or every profile change would miss the cache.
    """
    payload = {
        "v": CACHE_KEY_VERSION,
        "creative": msgspec.to_builtins(creative),
        "attributes": dict(attributes_used),
    }
    digest = hashlib.sha256(msgspec.json.encode(payload, order="sorted")).hexdigest()
    return f"ai{CACHE_KEY_VERSION}:{digest}"


def build_messages(creative: Creative, rendered_prompt: str) -> list[ChatMessage]:
    """The chat messages for a creative whose prompt has been rendered for one contact."""
    messages = [ChatMessage("system", creative.system)] if creative.system else []
    messages.append(ChatMessage("user", rendered_prompt))
    return messages
