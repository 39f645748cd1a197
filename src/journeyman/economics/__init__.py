"""Budgets, usage accounting, loop and phase detection."""
