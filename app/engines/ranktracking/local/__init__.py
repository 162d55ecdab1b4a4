"""Local search: where a business ranks on Google Maps and in the Local Finder, and geo-grid
scans of it from N×N points (see docs/ranktracking-local.md)."""
