"""Tenancy and access: organisations, workspaces, members, API keys, sign-in, secrets."""
