"""Checks: independent checkers of plans (allocations, planned IR, shadow-memory runs), apart from the planner."""
