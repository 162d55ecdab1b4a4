"""Several independent browsers (own cookie jars) on one app: the platform tests' fixture."""

from tests.platform.conftest import new_client  # noqa: F401 - a fixture
