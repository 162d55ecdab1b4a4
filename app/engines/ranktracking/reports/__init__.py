"""What a person reads after measuring: positions over time, movement, average position and
visibility per run, chart series and CSV exports. Read-only over the measured results."""
