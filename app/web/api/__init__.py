"""JSON API controllers, one module per engine plus the platform's."""
