"""reducers.statistics."""
