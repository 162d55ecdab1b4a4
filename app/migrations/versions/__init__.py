"""Alembic revision scripts (a package, so that the installed wheel carries them)."""
