"""A saved segment's reference in the predicate language (FN-74): both evaluators follow the
conditions bound into it, and an unbound reference (a segment that does not exist) matches
nobody on both sides and is a problem the validator names."""

from __future__ import annotations

from sqlalchemy import select

from app.engines.funnels.contacts.predicate_checks import problems
from app.engines.funnels.contacts.segments import (
    ContactFacts,
    InSegment,
    compile_sql,
    decode_predicate,
    evaluate,
)
from app.engines.funnels.models import Contact
from tests.engines.funnels.factories import contact, setup_names


async def test_fn74_a_reference_matches_as_its_bound_conditions_on_both_evaluators(
    runtime, space
) -> None:
    ws = space.workspace_id
    await setup_names(runtime, ws, tags=["vip"])
    vip = await contact(runtime, ws, "vip@example.com", tags=["vip"])
    await contact(runtime, ws, "other@example.com")
    bound = decode_predicate(
        {"kind": "segment", "segment_id": 1, "predicate": {"kind": "has_tag", "tag": "vip"}}
    )
    unbound = decode_predicate({"kind": "segment", "segment_id": 2})
    negated = decode_predicate({"kind": "not", "predicate": {"kind": "segment", "segment_id": 2}})
    now = runtime.clock.now()
    async with runtime.db.read() as s:

        async def sql(predicate) -> set[int]:
            where = compile_sql(predicate, workspace_id=ws, now=now, custom={})
            return set(await s.scalars(select(Contact.id).where(Contact.workspace_id == ws, where)))

        assert await sql(bound) == {vip}
        assert await sql(unbound) == set()
        assert len(await sql(negated)) == 2
    tagged = ContactFacts(attributes={}, fields={}, tags=frozenset({"vip"}))
    assert evaluate(bound, tagged, now=now, custom={})
    assert not evaluate(unbound, tagged, now=now, custom={})
    assert evaluate(negated, tagged, now=now, custom={})
    assert isinstance(unbound, InSegment)
    assert problems(bound, {}) == []
    assert problems(unbound, {}) == ["saved segment 2 does not exist"]
