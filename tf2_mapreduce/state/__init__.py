"""A run's state on the ps tasks: per-piece slots and per-key tables that commit each
piece exactly once, and the counters beside them."""
