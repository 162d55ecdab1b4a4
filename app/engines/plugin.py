"""What an engine contributes to the process: its jobs, its sweeps and its demo data."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from app.runtime import Runtime
    from app.scheduling.jobs import JobSpec
    from app.scheduling.sweeper import Sweep


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
StartSandbox = Callable[[], SandboxHandle]


@dataclass(frozen=True, slots=True)
class EnginePlugin:
    name: str
    title: str
    jobs: list[JobSpec[Any]] = field(default_factory=list)
    sweeps: list[Sweep] = field(default_factory=list)
    seed_demo: SeedDemo | None = None
    """Adds the engine's demo data to the demo workspace (run once, when the demo is created)."""
    sandboxes: dict[str, StartSandbox] = field(default_factory=dict)
    """Loopback simulators the demo starts, by name. ``meta``, ``sheets``, ``serp`` and ``smtp``
    (url ``smtp://host:port``) replace the matching settings; any other name is only passed to
    ``seed_demo`` in :attr:`DemoWorkspace.sandbox_urls`."""
