"""The consent tests run every sender: the outside channels' engine and simulators."""

from tests.engines.funnels.outside.conftest import (  # noqa: F401 - fixtures
    outside,
    session_sims,
    sims,
)
