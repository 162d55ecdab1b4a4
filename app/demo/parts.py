"""What each engine contributes to the demo: the simulators it needs and the sample data it seeds."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from app.runtime import Runtime


@dataclass(frozen=True, slots=True)
class DemoWorkspace:
    """The demo tenancy an engine seeds its sample data into."""

    organisation_id: int
    workspace_id: int
    admin_user_id: int
    sandbox_urls: dict[str, str]
    """Base URLs of the running loopback simulators, by name (``meta``, ``sheets``, ``serp``, …)."""


class SandboxHandle(Protocol):
    """A running simulator: its base URL, and how to stop it."""

    url: str

    def stop(self) -> None: ...


SeedDemo = Callable[["Runtime", DemoWorkspace], Awaitable[None]]
OnStart = Callable[["Runtime", int, dict[str, str]], Awaitable[None]]
"""Run at every start once the demo exists: the runtime, the demo workspace's id and the running
simulators' base URLs by name."""
StartSandbox = Callable[[], SandboxHandle]


@dataclass(frozen=True, slots=True)
class DemoPart:
    name: str
    seed: SeedDemo
    """Adds the engine's demo data to the demo workspace (run once, when the demo is created)."""
    sandboxes: dict[str, StartSandbox] = field(default_factory=dict)
    """Loopback simulators the demo starts, by name. ``meta``, ``sheets``, ``serp`` and ``smtp``
    (url ``smtp://host:port``) replace the matching settings unless the user set them; any other
    name is only passed to ``seed`` in :attr:`DemoWorkspace.sandbox_urls`."""
    on_start: OnStart | None = None
    """Reconciles the stored demo data with the simulators of this start (a simulator forgets
    what an earlier process told it, such as the credentials it issued)."""
