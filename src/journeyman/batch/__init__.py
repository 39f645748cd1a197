"""Batch runs and evaluation: many tasks under one global budget, suites and grading."""
