"""The demo points its workspace at the outside simulators it starts, and they answer."""

from __future__ import annotations

from datetime import timedelta

from app.demo.funnels_providers import DEMO_RESOURCE, SANDBOXES, configure_demo_providers
from app.demo.parts import DemoWorkspace
from app.engines.funnels.outside.config import KINDS, load
from app.integrations.booking import BookingClient
from app.runtime import Runtime
from tests.engines.funnels.factories import Space


async def test_demo_configures_every_outside_provider(runtime: Runtime, space: Space) -> None:
    handles = {name: start() for name, start in SANDBOXES.items()}
    try:
        demo = DemoWorkspace(
            organisation_id=0,
            workspace_id=space.workspace_id,
            admin_user_id=0,
            sandbox_urls={name: h.url for name, h in handles.items()},
        )
        await configure_demo_providers(runtime, demo)
        async with runtime.db.read() as session:
            loaded = {
                kind: await load(session, runtime.secrets, space.workspace_id, kind)
                for kind in KINDS
            }
        assert {k for k, p in loaded.items() if p is not None} == set(SANDBOXES)
        booking = loaded["booking"]
        assert booking is not None
        assert booking.secret
        client = BookingClient(base_url=booking.base_url, api_key=booking.secret)
        try:
            now = runtime.clock.now().replace(year=2030)  # the demo opens slots from real time
            slots = await client.list_slots(
                DEMO_RESOURCE, start=now - timedelta(days=3650), end=now
            )
        finally:
            await client.aclose()
        assert slots  # the demo's calendar has free calls, reachable with the configured key
    finally:
        for handle in handles.values():
            handle.stop()
