"""HTTP layer: the JSON API, webhook receivers and the dashboard."""
