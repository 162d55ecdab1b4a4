"""The funnel definition's JSON Schema as a structured-output request (FN-34).

Generated from the msgspec types the decoder uses (:class:`~app.engines.funnels.definitions.graph.
Definition`), never written by hand, so what the model is asked for and what the decoder accepts
cannot drift apart. OpenAI wants an object at the schema's root: the ``Definition`` definition is
lifted there, the others stay under ``$defs``. ``strict`` is off: strict mode requires every
property to be listed as required and forbids defaults, which the definition's optional fields
(``next``, ``label``, the wait's variants) rely on; the decoder checks the answer anyway.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec

from app.engines.funnels.definitions.graph import Definition

SCHEMA_NAME = "funnel_definition"


@lru_cache(maxsize=1)
def definition_schema() -> dict[str, Any]:
    """The JSON Schema of a definition with ``Definition`` itself at the root."""
    generated = msgspec.json.schema(Definition)
    defs: dict[str, Any] = dict(generated["$defs"])
    root = dict(defs.pop("Definition"))
    # References to the root (none today) would dangle once it left ``$defs``.
    assert "#/$defs/Definition" not in msgspec.json.encode(defs).decode()
    return {**root, "$defs": defs}


def response_format() -> dict[str, Any]:
    """``response_format`` of a chat-completions request asking for one definition."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": SCHEMA_NAME,
            "description": "A Sweepline funnel: its nodes, triggers, entry predicate and settings.",
            "schema": definition_schema(),
            "strict": False,
        },
    }
