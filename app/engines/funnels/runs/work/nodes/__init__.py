"""Node executors by kind: the flow nodes (:mod:`.flow`), this release's actions (:mod:`.actions`)
and the actions that reach outside (:mod:`app.engines.funnels.outside.executors`), each module
exporting its ``EXECUTORS`` table.

The engine's table of every kind it runs is built once, explicitly, by the plugin
(:data:`app.engines.funnels.plugin.EXECUTORS`) and handed to the runner; the runner itself never
changes to gain an action.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.engines.funnels.runs.work.nodes.base import Executor

Executors = Mapping[str, Executor]
"""Node kind → the executor of nodes of that kind."""
