"""The position-tracking tests' fixtures (defined beside the builders in factories.py)."""

from tests.engines.ranktracking.factories import (  # noqa: F401 - fixtures
    served_sim,
    sim,
    sink,
)
