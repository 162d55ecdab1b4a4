"""Tests of app/engines, one package per engine."""
