"""Batch runs: many tasks under one global budget, on this machine or a Ray cluster."""
