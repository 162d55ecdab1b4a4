"""The measurements a positions table shows: its columns (the newest measured requests, oldest
first) and the measurement just before them, which is read only for the change of a device
measured once in the window."""

from __future__ import annotations

from dataclasses import dataclass

from app.db.session import ReadSession
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.reports.measurements import Column, measured_runs


@dataclass(frozen=True, slots=True)
class Window:
    columns: list[Column]
    previous: Column | None

    @property
    def every(self) -> list[Column]:
        return ([self.previous] if self.previous is not None else []) + self.columns

    def device_runs(self) -> dict[str, list[int]]:
        """Each device's runs over ``every``, oldest first: the last is the device's latest
        measurement, the one before it the measurement its change compares with."""
        out: dict[str, list[int]] = {}
        for column in self.every:
            for device, run_id in column.runs.items():
                out.setdefault(device, []).append(run_id)
        return out

    def shown_runs(self) -> list[int]:
        """The runs of the columns: a row is shown when one of them measured it."""
        return [run_id for c in self.columns for run_id in c.runs.values()]

    def latest_runs(self) -> list[int]:
        return [runs[-1] for runs in self.device_runs().values()]

    def prior_runs(self) -> list[int]:
        return [runs[-2] for runs in self.device_runs().values() if len(runs) > 1]


async def table_window(session: ReadSession, schedule: Schedule, columns: int) -> Window:
    if schedule.data_type != "serp":
        return Window([], None)
    measured = await measured_runs(session, schedule.id, limit_requests=columns + 1)
    if len(measured) > columns:
        return Window(measured[1:], measured[0])
    return Window(measured, None)
