"""The position-tracking tests' fixtures, for its pages as for the engine
(tests/engines/ranktracking)."""

from tests.engines.ranktracking.factories import (  # noqa: F401 - fixtures
    gsc,
    served_gsc,
    served_sim,
    sim,
    sink,
)
