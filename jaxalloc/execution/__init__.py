"""Execution: runs a jx module op by op, eagerly or inside one arena, or as one compiled arena kernel."""
