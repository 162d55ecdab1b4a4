"""The funnels tests' fixtures, for the funnels pages as for the engine (tests/engines/funnels)."""

from tests.engines.funnels.factories import (  # noqa: F401 - fixtures
    engine,
    funnel_settings,
    session_sink,
    sink,
    space,
)
