"""``segment_enter`` evaluated at once when a contact changes through the contacts API (FN-10):
a field edit, a tag, a list, a new contact or an import starts the run in the request's own unit
of work, before any sweep or matcher runs."""

from __future__ import annotations

from sqlalchemy import delete

from app.engines.funnels.events.models import TriggerFire
from app.engines.funnels.events.work.segment_triggers import contacts_changed, evaluate_segments
from tests.conftest import auth
from tests.engines.funnels.factories import contact, runs_of, setup_names, tagging_funnel

SEGMENT = {
    "kind": "segment_enter",
    "predicate": {
        "kind": "any",
        "predicates": [
            {"kind": "field", "field": "plan", "op": "eq", "value": "pro"},
            {"kind": "has_tag", "tag": "vip"},
            {"kind": "in_list", "list": "Customers"},
        ],
    },
}


async def _runs(runtime, funnel_id: int) -> list[int]:
    return sorted(r.contact_id for r in await runs_of(runtime, funnel_id))


async def test_fn10_contact_changes_through_the_api_enter_the_segment_at_once(
    client, runtime, tenant, clock
) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["vip"], lists=["Customers"], fields={"plan": "text"})
    old = await contact(runtime, ws, "old@example.com", fields={"plan": "pro"})
    a = await contact(runtime, ws, "a@example.com")
    b = await contact(runtime, ws, "b@example.com")
    funnel_id = await tagging_funnel(runtime, ws, SEGMENT)  # publishing records the baseline
    headers = auth(tenant)

    r = await client.patch(
        f"/api/v1/funnels/contacts/{a}", json={"fields": {"plan": "pro"}}, headers=headers
    )
    assert r.status_code == 200, r.text
    assert await _runs(runtime, funnel_id) == [a]  # no sweep, no matcher: the same request

    r = await client.patch(f"/api/v1/funnels/contacts/{b}", json={"tags": ["vip"]}, headers=headers)
    assert r.status_code == 200, r.text
    assert await _runs(runtime, funnel_id) == [a, b]

    r = await client.post(
        "/api/v1/funnels/contacts",
        json={"email": "c@example.com", "lists": ["Customers"]},
        headers=headers,
    )
    assert r.status_code == 201, r.text
    c = r.json()["id"]
    assert await _runs(runtime, funnel_id) == [a, b, c]

    csv = "email,plan\nd@example.com,pro\ne@example.com,free\n"
    r = await client.post("/api/v1/funnels/contacts/import", json={"csv": csv}, headers=headers)
    assert r.status_code == 202, r.text
    from app.engines.funnels.contacts.csv_import import CONTACTS_IMPORT, CONTACTS_IMPORT_JOB
    from app.scheduling.bulk import run_bulk_job

    # Each imported chunk checks its contacts against the segment in its own transaction.
    await run_bulk_job(runtime.context(), CONTACTS_IMPORT, r.json()["id"], CONTACTS_IMPORT_JOB)
    runs = await _runs(runtime, funnel_id)
    assert len(runs) == 4
    assert old not in runs

    # Another edit of a member starts nothing twice; a refused edit changes nothing.
    r = await client.patch(
        f"/api/v1/funnels/contacts/{a}", json={"first_name": "Ann"}, headers=headers
    )
    assert r.status_code == 200
    r = await client.patch(
        f"/api/v1/funnels/contacts/{old}", json={"fields": {"plan": 5}}, headers=headers
    )
    assert r.status_code == 422
    async with runtime.db.write() as uow:
        assert await evaluate_segments(uow.session, now=clock.now()) == 0
    assert len(await _runs(runtime, funnel_id)) == 4


async def test_a_first_evaluation_for_a_few_contacts_takes_the_whole_baseline(
    runtime, tenant, clock
) -> None:
    """A funnel whose baseline was never taken (published before baselines were recorded at
    publish): evaluating a few changed contacts records everyone, so the next sweep does not
    take the rest of the segment for entrants."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["vip"], lists=["Customers"], fields={"plan": "text"})
    funnel_id = await tagging_funnel(runtime, ws, SEGMENT)
    async with runtime.db.write() as uow:
        await uow.session.execute(delete(TriggerFire).where(TriggerFire.funnel_id == funnel_id))
    members = [await contact(runtime, ws, f"m{i}@example.com", tags=["vip"]) for i in range(3)]
    async with runtime.db.write() as uow:
        started = await contacts_changed(
            uow.session, workspace_id=ws, contact_ids=members[:1], now=clock.now()
        )
        assert started == 0
        assert await evaluate_segments(uow.session, now=clock.now()) == 0
    assert await _runs(runtime, funnel_id) == []
