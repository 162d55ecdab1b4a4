"""The Funnels tests' fixtures (defined beside the factories in factories.py)."""

from tests.engines.funnels.factories import (  # noqa: F401 - fixtures
    engine,
    funnel_settings,
    session_sink,
    sink,
    space,
)
