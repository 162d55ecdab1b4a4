"""Local search: where a business ranks on Google Maps."""
