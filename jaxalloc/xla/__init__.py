"""XLA: XLA's memory statistics beside a plan, its buffer-assignment dumps, and its buffers re-planned."""
