"""Sweepline: a self-hosted automation engine for ad rules, funnels and position tracking."""
