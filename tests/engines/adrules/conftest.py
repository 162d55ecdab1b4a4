"""The ad-rules tests' fixtures (defined beside the builders in factories.py)."""

from tests.engines.adrules.factories import (  # noqa: F401 - fixtures
    graph,
    graph_server,
    other_ws,
    settings,
    world,
    ws,
)
