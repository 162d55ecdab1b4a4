"""The position-tracking pages of the dashboard (app/web/dashboard/ranktracking_*.py)."""
