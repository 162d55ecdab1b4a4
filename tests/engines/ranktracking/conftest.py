"""The position-tracking tests' fixtures (defined beside the builders in factories.py)."""

from tests.engines.ranktracking.factories import (  # noqa: F401 - fixtures
    gsc,
    served_gsc,
    served_sim,
    sim,
    sink,
)
