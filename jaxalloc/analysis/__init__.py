"""Analyses of jx IR that every stage reads: lifetimes on a block's schedule and the in-place and view rules."""
