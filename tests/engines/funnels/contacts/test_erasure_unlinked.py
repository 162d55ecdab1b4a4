"""FN-33's unlinked rows, found by the address rather than the contact id: log lines of the job
queue and the sweeps, a contact import still holding its upload and its report, a cached AI
generation, an event naming only the phone number, a stored idempotency answer. The export lists
them and the deletion empties them (the cache entry is removed: an empty text would be served);
another contact's rows, even one that mentions the address, and answers about someone else stay
as they were."""

from __future__ import annotations

from sqlalchemy import select

from app.engines.funnels.contacts.personal_data import ERASED
from app.engines.funnels.events.models import InboundEvent
from app.engines.funnels.outside.models import AiCacheEntry
from app.scheduling.bulk_models import BulkJob, BulkJobError
from app.scheduling.models import Job, SweeperState
from tests.conftest import auth

EMAIL = "zelda.quux@example.com"
ANN = "ann@example.com"


async def _create(client, tenant, key: str, **body) -> int:
    got = await client.post(
        "/api/v1/funnels/contacts",
        json=body,
        headers={**auth(tenant), "Idempotency-Key": key},
    )
    assert got.status_code == 201, got.text
    return int(got.json()["id"])


async def _seed_unlinked(runtime, ws: int, ann: int) -> None:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        s = uow.session
        s.add(
            Job(
                id="funnels.deliver:7",
                name="funnels.deliver",
                queue="default",
                payload=b"\x81\xa5shard\x00",
                status="dead",
                max_tries=3,
                run_at=now,
                created_at=now,
                last_error=f"SMTP 550 for <{EMAIL.upper()}>: mailbox unavailable",
            )
        )
        s.add(SweeperState(name="funnels.tick", last_error="delivery to +1 (555) 0199 failed"))
        job = BulkJob(
            workspace_id=ws,
            kind="contacts.import",
            status="queued",
            params={"targets": ["email"]},
            source=f"email\n{EMAIL}\n",
            created_at=now,
            updated_at=now,
        )
        s.add(job)
        await s.flush()
        s.add(BulkJobError(bulk_job_id=job.id, item=2, field="", message=f"refused: {EMAIL}"))
        s.add(
            AiCacheEntry(
                workspace_id=ws,
                cache_key="k1",
                text=f"Dear Zelda ({EMAIL}), your plumbus awaits",
                model="m",
                created_at=now,
            )
        )
        for contact_id, external_id, payload in (
            (None, "sms-1", {"from": "+1-555-0199", "body": "STOP"}),
            (ann, "ref-1", {"contact": {"email": ANN}, "properties": {"referred": EMAIL}}),
        ):
            s.add(
                InboundEvent(
                    workspace_id=ws,
                    source="api",
                    name="note",
                    external_id=external_id,
                    payload=payload,
                    received_at=now,
                    processed_at=now,
                    contact_id=contact_id,
                    outcome="dropped: no contact" if contact_id is None else "recorded",
                )
            )


async def test_fn33_rows_naming_the_address_without_the_contact_id_are_exported_and_emptied(
    client, runtime, tenant
) -> None:
    ws = tenant.workspace_id
    zelda = await _create(client, tenant, "z", email=EMAIL, first_name="Zelda", phone="+1 555 0199")
    ann = await _create(client, tenant, "a", email=ANN, first_name="Ann")
    await _seed_unlinked(runtime, ws, ann)

    body = (
        await client.get(f"/api/v1/funnels/contacts/{zelda}/export", headers=auth(tenant))
    ).json()
    assert [j["id"] for j in body["job_log"]] == ["funnels.deliver:7"]
    assert [s["name"] for s in body["sweep_log"]] == ["funnels.tick"]
    assert [b["source"] for b in body["bulk_jobs"]] == [f"email\n{EMAIL}\n"]
    assert [e["message"] for e in body["bulk_job_errors"]] == [f"refused: {EMAIL}"]
    assert [c["cache_key"] for c in body["ai_cache"]] == ["k1"]
    # The phone-only event is theirs; Ann's event mentioning the address is Ann's.
    assert [e["external_id"] for e in body["inbound_events"]] == ["sms-1"]
    assert [a["response_body"]["email"] for a in body["idempotency_answers"]] == [EMAIL]

    gone = await client.delete(f"/api/v1/funnels/contacts/{zelda}", headers=auth(tenant))
    assert gone.status_code == 204
    async with runtime.db.read() as s:
        assert (await s.get(Job, "funnels.deliver:7")).last_error == ERASED
        assert (await s.get(SweeperState, "funnels.tick")).last_error == ERASED
        job = (await s.execute(select(BulkJob.source, BulkJob.params, BulkJob.last_error))).one()
        assert tuple(job) == ("", {}, ERASED)
        [error] = await s.scalars(select(BulkJobError))
        assert (error.item, error.message) == (2, ERASED)
        assert list(await s.scalars(select(AiCacheEntry))) == []
        events = {e.external_id: e for e in await s.scalars(select(InboundEvent))}
        assert (events["sms-1"].payload, events["sms-1"].outcome) == ({}, ERASED)
        assert events["ref-1"].payload["properties"] == {"referred": EMAIL}
    # Ann's stored answer is still hers; Zelda's is sealed and empty.
    ann_body = (
        await client.get(f"/api/v1/funnels/contacts/{ann}/export", headers=auth(tenant))
    ).json()
    assert [a["response_body"]["email"] for a in ann_body["idempotency_answers"]] == [ANN]
    replay = await client.post(
        "/api/v1/funnels/contacts",
        json={"email": EMAIL, "first_name": "Zelda", "phone": "+1 555 0199"},
        headers={**auth(tenant), "Idempotency-Key": "z"},
    )
    assert replay.json() == {"erased": True}
