"""``best``: run every other registered allocator and keep the smallest plan.

It is the answer to "what would a portfolio of today's planners and NNC achieve"; it can never be
worse than any of them. Equal peaks go to the allocator registered first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from jaxalloc.allocators.problem import Allocation, Problem


def best(problem: Problem, allocators: Mapping[str, Callable[[Problem], Allocation]]) -> Allocation:
    """The smallest plan among ``allocators`` (name -> function), each run with its defaults."""
    winner: Allocation | None = None
    for run in allocators.values():
        plan = run(problem)
        if winner is None or plan.peak < winner.peak:
            winner = plan
    if winner is None:
        raise ValueError("best needs at least one allocator to run")
    return winner
