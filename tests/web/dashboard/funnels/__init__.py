"""The funnels pages of the dashboard (app/web/dashboard/funnel*.py)."""
