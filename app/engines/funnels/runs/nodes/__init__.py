"""Node executors by kind. The runner dispatches through :data:`EXECUTORS`; an engine module adds
a kind with :func:`register` (the runner itself never changes to gain an action)."""

from __future__ import annotations

from app.engines.funnels.runs.nodes.base import Executor

EXECUTORS: dict[str, Executor] = {}


def register(kind: str, executor: Executor) -> None:
    EXECUTORS[kind] = executor


def executable_kinds() -> frozenset[str]:
    _load_builtin()
    return frozenset(EXECUTORS)


def executor_for(kind: str) -> Executor | None:
    _load_builtin()
    return EXECUTORS.get(kind)


_loaded = False


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from app.engines.funnels.outside import executors as outside
    from app.engines.funnels.runs.nodes import actions, flow

    # The outside actions come last: their notify_team (members only) replaces the basic one.
    for kind, executor in {**flow.EXECUTORS, **actions.EXECUTORS, **outside.EXECUTORS}.items():
        EXECUTORS.setdefault(kind, executor)
