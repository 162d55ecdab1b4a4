"""Database layer: engines, units of work, the declarative base and column types."""
