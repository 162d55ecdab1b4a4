"""Ad rules engine."""

# The worker's tables live in their own module; importing them with the package puts them in the
# metadata wherever the engine's models are loaded (migration checks, test clean-up).
from app.engines.adrules import run_models as _run_models  # noqa: F401
