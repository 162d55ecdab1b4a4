"""Ad rules engine."""
