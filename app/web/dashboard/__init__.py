"""Server-rendered dashboard pages (Jinja, htmx for partial refreshes, no build step)."""
