"""Provider-neutral types, events, errors, the lifecycle state machine and run results (no I/O)."""
