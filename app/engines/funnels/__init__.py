"""Funnels engine."""
