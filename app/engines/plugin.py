"""What an engine contributes to the process: its jobs and its sweeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.scheduling.jobs import JobSpec
    from app.scheduling.sweeper import Sweep


@dataclass(frozen=True, slots=True)
class EnginePlugin:
    name: str
    title: str
    jobs: list[JobSpec[Any]] = field(default_factory=list)
    sweeps: list[Sweep] = field(default_factory=list)
