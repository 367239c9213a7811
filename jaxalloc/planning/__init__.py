"""Planning: liveness, in-place rules and buffer assignment over nested regions, gathered into a `Plan`."""
