"""Each trigger end to end into a run: form_submit, page_visit, message_opened, link_clicked,
booking_made, payment_made, segment_enter, date_field, schedule and manual for a segment; a wait
ending early on an event (FN-11)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.engines.funnels.events.due.date_triggers import fire_date_triggers
from app.engines.funnels.events.due.schedule_triggers import fire_schedules
from app.engines.funnels.events.models import InboundEvent
from app.engines.funnels.events.tracking import MessageRef, contact_token, link_url, pixel_url
from app.engines.funnels.events.work.segment_triggers import evaluate_segments
from app.engines.funnels.models import Contact, ContactEvent
from tests.conftest import auth
from tests.engines.funnels.factories import (
    contact,
    count,
    graph,
    node,
    published,
    runs_of,
    settle,
    setup_names,
    signed,
    steps_of,
    tagging_funnel,
)


async def test_form_submit_hosted_form_into_a_run(client, runtime, tenant) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["lead"], fields={"company": "text"})
    created = await client.post(
        "/api/v1/funnels/forms",
        json={
            "name": "Newsletter",
            "fields": [
                {"key": "first_name", "label": "Name", "required": True},
                {"key": "company"},
            ],
            "add_tag": "lead",
        },
        headers=auth(tenant),
    )
    assert created.status_code == 201, created.text
    form = created.json()
    assert f"/t/f/{form['public_id']}" in form["embed_html"]
    funnel_id = await tagging_funnel(
        runtime, ws, {"kind": "form_submit", "form": form["public_id"]}
    )
    page = await client.get(f"/t/f/{form['public_id']}")
    assert page.status_code == 200
    assert 'name="email"' in page.text
    data = {
        "email": "Zoe@Example.com",
        "first_name": "Zoe",
        "company": "Acme",
        "submission_id": "s-1",
    }
    first = await client.post(f"/t/f/{form['public_id']}", data=data)
    again = await client.post(f"/t/f/{form['public_id']}", data=data)  # a double click
    assert first.status_code == 200
    assert "Thank you" in first.text
    assert again.status_code == 200
    assert await count(runtime, InboundEvent) == 1
    await settle(runtime)
    runs = await runs_of(runtime, funnel_id)
    assert len(runs) == 1
    async with runtime.db.read() as s:
        zoe = await s.scalar(select(Contact).where(Contact.email == "zoe@example.com"))
    assert zoe is not None
    assert zoe.first_name == "Zoe"
    assert zoe.fields == {"company": "Acme"}
    assert runs[0].contact_id == zoe.id


async def test_form_submit_refuses_bad_input_without_storing(client, runtime, tenant) -> None:
    form = (
        await client.post(
            "/api/v1/funnels/forms",
            json={"name": "F", "fields": [{"key": "first_name", "required": True}]},
            headers=auth(tenant),
        )
    ).json()
    no_email = await client.post(f"/t/f/{form['public_id']}", data={"first_name": "A"})
    no_name = await client.post(f"/t/f/{form['public_id']}", data={"email": "a@b.co"})
    missing = await client.post("/t/f/nope", data={"email": "a@b.co"})
    assert no_email.status_code == 422
    assert no_name.status_code == 422
    assert missing.status_code == 404
    assert await count(runtime, InboundEvent) == 0
    bad = await client.post(
        "/api/v1/funnels/forms",
        json={"name": "F", "fields": [{"key": "email"}]},
        headers=auth(tenant),
    )
    assert bad.status_code == 422


async def test_page_visit_from_the_site_snippet_into_a_run(
    client, runtime, tenant, other_tenant
) -> None:
    ws = tenant.workspace_id
    ann = await contact(runtime, ws, "ann@example.com")
    funnel_id = await tagging_funnel(
        runtime, ws, {"kind": "page_visit", "url_contains": "/pricing"}
    )
    script = await client.get("/t/s.js")
    assert script.status_code == 200
    assert "sendBeacon" in script.text
    site = (await client.get("/api/v1/funnels/site", headers=auth(tenant))).json()
    visitor = (
        await client.get(f"/api/v1/funnels/contacts/{ann}/visitor-token", headers=auth(tenant))
    ).json()
    assert site["site_key"] in site["script_tag"]
    body = {
        "key": site["site_key"],
        "visitor": visitor["token"],
        "id": "v1",
        "url": "https://shop.example/blog",
    }
    assert (await client.post("/t/c", json=body)).status_code == 204
    body = {**body, "id": "v2", "url": "https://shop.example/pricing"}
    assert (await client.post("/t/c", json=body)).status_code == 204
    forged = {**body, "id": "v3", "visitor": contact_token(other_tenant.webhook_secret, ws, ann)}
    assert (await client.post("/t/c", json=forged)).status_code == 401
    await settle(runtime)
    assert await count(runtime, ContactEvent, ContactEvent.name == "page_visit") == 2
    runs = await runs_of(runtime, funnel_id)
    assert [r.contact_id for r in runs] == [ann]


async def test_message_opened_pixel_and_link_clicked_into_runs(client, runtime, tenant) -> None:
    ws = tenant.workspace_id
    ann = await contact(runtime, ws, "ann@example.com")
    bob = await contact(runtime, ws, "bob@example.com")
    opened = await tagging_funnel(runtime, ws, {"kind": "message_opened"})
    await setup_names(runtime, ws, tags=["clicked"])
    clicked, _ = await published(
        runtime,
        ws,
        graph(
            node("add_tag", "c", tag="clicked"),
            triggers=[{"kind": "link_clicked", "url_contains": "offer"}],
        ),
        name="Clicks",
    )
    secret = tenant.webhook_secret
    pixel = pixel_url("http://testserver", secret, MessageRef(ws, ann, effect="run-1-step-1"))
    link = link_url("http://testserver", secret, MessageRef(ws, bob), "https://shop.example/offer")
    got = await client.get(pixel.removeprefix("http://testserver"))
    assert got.status_code == 200
    assert got.headers["content-type"] == "image/gif"
    redirect = await client.get(link.removeprefix("http://testserver"))
    assert redirect.status_code == 302
    assert redirect.headers["location"] == "https://shop.example/offer"
    # A tampered link (another target) is not an open redirect and records nothing.
    token = link.rsplit("/", 1)[1]
    tampered = await client.get(f"/t/l/{token[:-3]}abc")
    assert tampered.status_code == 404
    assert await count(runtime, InboundEvent) == 2
    await settle(runtime)
    assert [r.contact_id for r in await runs_of(runtime, opened)] == [ann]
    assert [r.contact_id for r in await runs_of(runtime, clicked)] == [bob]


async def test_fn11_wait_ends_early_when_the_message_is_opened(
    client, runtime, tenant, engine, clock
) -> None:
    """FN-11: a run waiting three days for an open continues at once on the event branch."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["engaged", "nudged"])
    funnel_id, _ = await published(
        runtime,
        ws,
        graph(
            node(
                "wait", "w", days=3, until_event="message_opened", next="nudge", event_next="thanks"
            ),
            node("add_tag", "nudge", tag="nudged"),
            node("add_tag", "thanks", tag="engaged"),
            triggers=[{"kind": "api_event", "event": "signup"}],
        ),
    )
    ann = await contact(runtime, ws, "ann@example.com")
    await client.post(
        "/hooks/funnels/events",
        json={"event_id": "s1", "name": "signup", "contact": {"id": ann}},
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    await settle(runtime)
    await engine.drive()
    clock.advance(hours=5)
    pixel = pixel_url("http://testserver", tenant.webhook_secret, MessageRef(ws, ann))
    await client.get(pixel.removeprefix("http://testserver"))
    await settle(runtime)
    await engine.drive()
    run = (await runs_of(runtime, funnel_id))[0]
    assert run.status == "completed"
    assert [s.node_id for s in await steps_of(runtime, run.id)] == ["w", "w", "thanks"]


async def test_booking_and_payment_webhooks_into_runs(client, runtime, tenant, clock) -> None:
    ws = tenant.workspace_id
    booked = await tagging_funnel(runtime, ws, {"kind": "booking_made", "resource": "demo-room"})
    await setup_names(runtime, ws, tags=["paid"])
    paid, _ = await published(
        runtime,
        ws,
        graph(
            node("add_tag", "p", tag="paid"),
            triggers=[{"kind": "payment_made", "min_amount_minor": 1000, "currency": "eur"}],
        ),
        name="Paid",
    )
    now = int(clock.now().timestamp())
    booking = {
        "id": "bk-evt-1",
        "type": "booking.created",
        "booking": {
            "id": "b1",
            "resource_id": "demo-room",
            "start": "2026-03-04T10:00:00Z",
            "attendee": {"email": "cat@example.com", "name": "Cat"},
        },
    }
    body, headers = signed(tenant.webhook_secret, booking, at=now)
    r = await client.post(f"/hooks/funnels/{ws}/bookings", content=body, headers=headers)
    assert r.status_code == 202, r.text
    payment = {
        "id": "evt_1",
        "type": "payment_intent.succeeded",
        "data": {
            "object": {
                "id": "pi_1",
                "amount": 2500,
                "currency": "eur",
                "receipt_email": "dan@example.com",
            }
        },
    }
    body, headers = signed(tenant.webhook_secret, payment, at=now, header="Stripe-Signature")
    assert (
        await client.post(f"/hooks/funnels/{ws}/payments", content=body, headers=headers)
    ).status_code == 202
    dup = await client.post(f"/hooks/funnels/{ws}/payments", content=body, headers=headers)
    assert dup.json()["stored"] is False
    small = {
        **payment,
        "id": "evt_2",
        "data": {"object": {"amount": 500, "currency": "eur", "receipt_email": "eve@example.com"}},
    }
    body, headers = signed(tenant.webhook_secret, small, at=now, header="Stripe-Signature")
    await client.post(f"/hooks/funnels/{ws}/payments", content=body, headers=headers)
    forged, headers = signed(
        "not-the-secret", {**payment, "id": "evt_3"}, at=now, header="Stripe-Signature"
    )
    assert (
        await client.post(f"/hooks/funnels/{ws}/payments", content=forged, headers=headers)
    ).status_code == 401
    assert await count(runtime, InboundEvent) == 3
    await settle(runtime)
    async with runtime.db.read() as s:
        emails = {c.id: c.email for c in await s.scalars(select(Contact))}
    assert [emails[r.contact_id] for r in await runs_of(runtime, booked)] == ["cat@example.com"]
    assert [emails[r.contact_id] for r in await runs_of(runtime, paid)] == ["dan@example.com"]


async def test_segment_enter_when_a_contact_starts_matching(client, runtime, tenant, clock) -> None:
    """FN-10: people already in the segment when the funnel went live did not enter it; a
    contact who starts matching does (on the event that changed them, and on the sweep)."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["vip"])
    await contact(runtime, ws, "old@example.com", tags=["vip"])
    funnel_id = await tagging_funnel(
        runtime, ws, {"kind": "segment_enter", "predicate": {"kind": "has_tag", "tag": "vip"}}
    )
    async with runtime.db.write() as uow:
        assert await evaluate_segments(uow.session, now=clock.now()) == 0  # the baseline
    new = await contact(runtime, ws, "new@example.com")
    # The contact's change arrives as an event (tagged by the customer's app) …
    await client.post(
        "/hooks/funnels/events",
        json={"event_id": "t1", "name": "upgraded", "contact": {"id": new}},
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    from app.engines.funnels.contacts.memberships import add_tag

    async with runtime.db.write() as uow:
        row = await uow.session.get(Contact, new)
        assert row is not None
        await add_tag(uow.session, row, "vip", clock.now())
    await settle(runtime)
    assert [r.contact_id for r in await runs_of(runtime, funnel_id)] == [new]
    # … and the periodic sweep starts nobody twice.
    async with runtime.db.write() as uow:
        assert await evaluate_segments(uow.session, now=clock.now()) == 0
    late = await contact(runtime, ws, "late@example.com", tags=["vip"])
    async with runtime.db.write() as uow:
        assert await evaluate_segments(uow.session, now=clock.now()) == 1
    assert {r.contact_id for r in await runs_of(runtime, funnel_id)} == {new, late}


async def test_date_field_fires_once_per_occurrence_in_the_contacts_zone(
    runtime, tenant, clock
) -> None:
    """date_field: the birthday at 9 am Berlin time (08:00 UTC in winter), once per occurrence."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, fields={"birthday": "date"})
    ann = await contact(
        runtime, ws, "ann@example.com", timezone="Europe/Berlin", fields={"birthday": "1990-03-05"}
    )
    await contact(runtime, ws, "bob@example.com", fields={"birthday": "1990-07-01"})
    funnel_id = await tagging_funnel(
        runtime,
        ws,
        {"kind": "date_field", "field": "birthday", "hour": 9, "yearly": True},
        settings={"reentry": True},
    )
    clock.set(clock.now().replace(day=5, hour=7, minute=59))
    async with runtime.db.write() as uow:
        assert await fire_date_triggers(uow.session, now=clock.now()) == 0
    clock.advance(minutes=1)
    for expected in (1, 0):
        async with runtime.db.write() as uow:
            assert await fire_date_triggers(uow.session, now=clock.now()) == expected
    clock.advance(hours=3)
    async with runtime.db.write() as uow:
        assert await fire_date_triggers(uow.session, now=clock.now()) == 0
    assert [r.contact_id for r in await runs_of(runtime, funnel_id)] == [ann]


async def test_schedule_fires_each_occurrence_once_for_its_segment(runtime, tenant, clock) -> None:
    """schedule: every Monday at 10:00 UTC, everyone tagged 'weekly' enters, once per Monday."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["weekly"])
    ann = await contact(runtime, ws, "ann@example.com", tags=["weekly"])
    await contact(runtime, ws, "bob@example.com")
    funnel_id = await tagging_funnel(
        runtime,
        ws,
        {
            "kind": "schedule",
            "hour": 10,
            "weekdays": [0],
            "segment": {"kind": "has_tag", "tag": "weekly"},
        },
    )
    async with runtime.db.write() as uow:  # Monday 09:00: not yet
        assert await fire_schedules(uow, runtime.queue, now=clock.now(), chunk_items=200) == 0
    clock.advance(hours=1, seconds=5)
    for expected in (1, 0):
        async with runtime.db.write() as uow:
            assert (
                await fire_schedules(uow, runtime.queue, now=clock.now(), chunk_items=200)
                == expected
            )
    assert [r.contact_id for r in await runs_of(runtime, funnel_id)] == [ann]
    clock.advance(days=7)
    async with runtime.db.write() as uow:  # next Monday: ann already had her run (no re-entry)
        assert await fire_schedules(uow, runtime.queue, now=clock.now(), chunk_items=200) == 0


async def test_manual_entry_for_a_segment(client, runtime, tenant, other_tenant) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["beta"])
    ann = await contact(runtime, ws, "ann@example.com", tags=["beta"])
    await contact(runtime, ws, "bob@example.com")
    funnel_id = await tagging_funnel(runtime, ws, {"kind": "manual"})
    body = {"segment": {"kind": "has_tag", "tag": "beta"}}
    r = await client.post(
        f"/api/v1/funnels/{funnel_id}/segment-entries", json=body, headers=auth(tenant)
    )
    assert r.status_code == 200
    assert r.json() == {"started": 1, "job": None}
    again = await client.post(
        f"/api/v1/funnels/{funnel_id}/segment-entries", json=body, headers=auth(tenant)
    )
    assert again.json() == {"started": 0, "job": None}
    foreign = await client.post(
        f"/api/v1/funnels/{funnel_id}/segment-entries", json=body, headers=auth(other_tenant)
    )
    assert foreign.status_code == 404
    assert [r.contact_id for r in await runs_of(runtime, funnel_id)] == [ann]


async def test_manual_entry_predicates_are_checked_against_the_workspace_fields(
    client, runtime, tenant
) -> None:
    """A segment or predicate that breaks a rule (a number field compared with text, a field the
    workspace does not have) is a 422 naming it, for segment entries and for enrolment alike;
    nobody enters."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, fields={"score": "number"})
    await contact(runtime, ws, "ann@example.com")
    funnel_id = await tagging_funnel(runtime, ws, {"kind": "manual"})
    wrong = {"kind": "field", "field": "score", "op": "eq", "value": "abc"}
    unknown = {"kind": "any", "predicates": [{"kind": "field", "field": "nope", "op": "exists"}]}
    for path, name in (("segment-entries", "segment"), ("enroll", "predicate")):
        for predicate, says in ((wrong, "is not a number"), (unknown, "unknown field 'nope'")):
            r = await client.post(
                f"/api/v1/funnels/{funnel_id}/{path}",
                json={name: predicate},
                headers=auth(tenant),
            )
            assert r.status_code == 422, (path, r.text)
            assert r.json()["details"][0]["field"] == name
            assert says in r.json()["details"][0]["message"]
    assert await runs_of(runtime, funnel_id) == []


async def test_fn26_time_and_segment_triggers_are_validated(runtime, tenant) -> None:
    """A date_field on a field that is not a date, a schedule with an impossible hour, a segment
    naming an unknown field: publishing is refused, each problem named."""
    from app.engines.funnels.errors import InvalidGraph

    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["entered"], fields={"plan": "text"})
    triggers: list[dict[str, Any]] = [
        {"kind": "date_field", "field": "plan"},
        {"kind": "schedule", "hour": 25, "weekdays": [7], "timezone": "Mars/Olympus"},
        {"kind": "segment_enter", "predicate": {"kind": "field", "field": "nope", "op": "exists"}},
    ]
    try:
        await published(runtime, ws, graph(node("add_tag", "t", tag="entered"), triggers=triggers))
    except InvalidGraph as exc:
        messages = " | ".join(d["message"] for d in exc.details)
    else:
        raise AssertionError("an invalid trigger was published")
    assert "date_field needs a custom field of type date" in messages
    assert "hour 0-23" in messages
    assert "weekdays 0 (Monday) to 6" in messages
    assert "unknown time zone" in messages
    assert "unknown field 'nope'" in messages


async def test_a_large_scheduled_segment_enters_in_chunks(runtime, tenant, clock) -> None:
    """A schedule whose segment holds more contacts than one chunk enters the first chunk with
    the sweep's transaction and the rest through the enrolment bulk job (issue 11 item 4)."""
    from app.engines.funnels.runs.due.enrolment import ENROLMENT, ENROLMENT_JOB
    from app.scheduling.bulk import list_bulk_jobs, run_bulk_job

    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["weekly"])
    for i in range(9):
        await contact(runtime, ws, f"w{i}@example.com", tags=["weekly"])
    funnel_id = await tagging_funnel(
        runtime,
        ws,
        {
            "kind": "schedule",
            "hour": 10,
            "weekdays": [0],
            "segment": {"kind": "has_tag", "tag": "weekly"},
        },
    )
    clock.advance(hours=1, seconds=5)  # Monday 10:00
    async with runtime.db.write() as uow:
        assert await fire_schedules(uow, runtime.queue, now=clock.now(), chunk_items=4) == 4
    async with runtime.db.read() as s:
        (job,) = await list_bulk_jobs(s, ws, before=None, limit=5, kinds=[ENROLMENT.name])
    await run_bulk_job(runtime.context(job_id="t"), ENROLMENT, job.id, ENROLMENT_JOB)
    assert len(await runs_of(runtime, funnel_id)) == 9
