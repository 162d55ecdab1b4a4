"""Campaigns (broadcasts): an audience materialised once, a schedule, a rate limit and a
crash-safe, resumable send (FN-28 to FN-30)."""
