"""The three engines. They share the core (db, scheduling, integrations) but never each other."""
