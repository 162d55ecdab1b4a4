"""Tests of the dashboard's pages (app/web/dashboard), by the engine whose pages they are."""
