"""Position tracking engine."""
