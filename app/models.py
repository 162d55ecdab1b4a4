"""Every table of the application, gathered for Alembic's autogenerate comparison."""

from __future__ import annotations

import importlib
import pkgutil

import app.engines
from app.db.base import Base
from app.platform import models as _platform_models  # noqa: F401
from app.platform import two_factor_models as _two_factor_models  # noqa: F401
from app.platform.audit import models as _audit_models  # noqa: F401
from app.scheduling import bulk_models as _bulk_models  # noqa: F401
from app.scheduling import models as _scheduling_models  # noqa: F401

# Engines register their tables by having a ``models`` module; import each one found.
for _engine in (m for m in pkgutil.iter_modules(app.engines.__path__) if m.ispkg):
    try:
        importlib.import_module(f"app.engines.{_engine.name}.models")
    except ModuleNotFoundError as exc:
        if exc.name != f"app.engines.{_engine.name}.models":
            raise

metadata = Base.metadata
