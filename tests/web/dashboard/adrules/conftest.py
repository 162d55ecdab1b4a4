"""The ad-rules tests' fixtures, for the ad-rules pages as for the engine (tests/engines/adrules):
among them ``settings`` with the Graph API pointed at its simulator."""

from tests.engines.adrules.factories import (  # noqa: F401 - fixtures
    graph,
    graph_server,
    other_ws,
    settings,
    world,
    ws,
)
