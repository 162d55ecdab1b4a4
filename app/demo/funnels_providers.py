"""The demo workspace's outside providers: the loopback simulators, started with the demo, and
the configuration pointing the workspace at them (with the simulators' sandbox keys)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from app.clock import SystemClock
from app.demo.parts import SandboxHandle, StartSandbox
from app.engines.funnels.outside.config import configure
from app.integrations.http_guard import shared_guard
from app.sandbox.ai import start_ai_sandbox
from app.sandbox.booking import BookingSandbox, start_booking_sandbox
from app.sandbox.letter import start_letter_sandbox
from app.sandbox.payments import start_payments_sandbox
from app.sandbox.push import start_push_sandbox
from app.sandbox.sms import start_sms_sandbox

if TYPE_CHECKING:
    from app.demo.parts import DemoWorkspace
    from app.runtime import Runtime

DEMO_RESOURCE = "demo-calls"
"""The booking resource the demo's simulator offers slots of."""


def _booking() -> SandboxHandle:
    sandbox = BookingSandbox()
    # Half-hour calls on weekdays for the next four weeks, from the next full hour.
    start = SystemClock().now().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    for day in range(28):
        first = start + timedelta(days=day)
        if first.weekday() < 5:
            sandbox.add_slots(DEMO_RESOURCE, first, 8)
    return start_booking_sandbox(sandbox)


SANDBOXES: dict[str, StartSandbox] = {
    "sms": start_sms_sandbox,
    "push": start_push_sandbox,
    "letter": start_letter_sandbox,
    "payments": start_payments_sandbox,
    "booking": _booking,
    "ai": start_ai_sandbox,
}

_PROVIDERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # kind: (shape, sandbox key, options)
    "sms": ("json", "sms-sandbox-key", {"sender": "+15005550006"}),
    "push": ("json", "push-sandbox-key", {}),
    "letter": ("json", "letter-sandbox-key", {}),
    "payments": ("stripe", "sk_test_sandbox", {}),
    "booking": ("json", "booking-sandbox-key", {"window_days": 14}),
    "ai": ("openai", "sk-sandbox-ai", {"model": "gpt-4o-mini", "max_tokens": 120}),
}


async def configure_demo_providers(runtime: Runtime, demo: DemoWorkspace) -> None:
    """Point the demo workspace at every simulator that is running."""
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        for kind, (shape, key, options) in _PROVIDERS.items():
            url = demo.sandbox_urls.get(kind)
            if url is None:
                continue
            await configure(
                uow.session,
                runtime.secrets,
                shared_guard(runtime.resources, runtime.settings.integrations),
                workspace_id=demo.workspace_id,
                kind=kind,
                shape=shape,
                base_url=url,
                options=options,
                secret=key,
                now=now,
            )
