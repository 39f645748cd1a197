"""Persistence of runs: trajectories (and, later, the SQLite session store, resume, undo)."""
