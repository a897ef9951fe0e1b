"""outputs.stats."""
