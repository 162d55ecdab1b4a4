"""JSON columns read back through msgspec (app/db/json_codec.py): the same values as the
standard library's reader, including what only the standard library accepts, on the test's
database as its engines are built."""

from __future__ import annotations

import json
import math

import pytest
from sqlalchemy import JSON, column, text

from app.db.json_codec import decode_document
from app.db.session import Database

DOCUMENTS = [
    '{"a": 1, "b": [1.5, -2, "x\\u00e9\\ud83d\\ude00", null, true, false], "c": {}}',
    "[]",
    '"plain"',
    "12345678901234567890123",
    '{"same": 1, "same": 2}',
    '{"deep": [[[{"k": "v"}]]]}',
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_a_document_reads_as_the_standard_library_reads_it(document: str) -> None:
    assert decode_document(document) == json.loads(document)
    assert decode_document(document.encode()) == json.loads(document)


def test_what_only_the_standard_library_accepts_is_still_read() -> None:
    assert math.isnan(decode_document('{"x": NaN}')["x"])
    assert decode_document("[Infinity, 1e400]") == [math.inf, math.inf]


def test_a_malformed_document_is_an_error() -> None:
    with pytest.raises(ValueError):
        decode_document('{"a": ')


async def test_the_databases_json_values_come_back_through_it(shared_db: Database) -> None:
    document = {"name": "Zoë", "n": [1, 2.5, None], "nested": {"ok": True}}
    cast = "CAST(:d AS jsonb)" if shared_db.is_postgres else "json(:d)"
    async with shared_db.read() as session:
        assert session.bind is not None
        assert session.bind.dialect._json_deserializer is decode_document
        got = await session.scalar(
            text(f"SELECT {cast} AS d")
            .columns(column("d", JSON))
            .bindparams(d=json.dumps(document))
        )
    assert got == document
