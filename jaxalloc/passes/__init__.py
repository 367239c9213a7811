"""Passes: the xDSL passes over jx programs, those that rewrite them and those that write their plans."""
