"""Webhook receivers (authenticated by ingest token or HMAC signature)."""
