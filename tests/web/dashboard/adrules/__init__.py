"""The ad-rules pages of the dashboard (app/web/dashboard/adrules_*.py)."""
