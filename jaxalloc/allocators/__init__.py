"""Allocators: NNC and today's planners on the plain problem (sizes + conflicts), by name.

Every allocator takes a :class:`Problem` and returns an :class:`Allocation`; ``ALLOCATORS`` maps the
registered names to them, in the order ``best`` tries them. Options (``width`` for ``beam``,
``open_ends`` for ``nnc-2018``, ``time_limit`` in seconds for ``search``) pass through :func:`allocate`.

``best`` is the portfolio of the fast allocators; ``search`` starts from that portfolio's plan and
searches for smaller ones until it proves optimality or its time limit (10 s by default) runs out,
so ``best`` does not run it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from jaxalloc.allocators import beam as _beam
from jaxalloc.allocators import best as _best
from jaxalloc.allocators import greedy as _greedy
from jaxalloc.allocators import nnc as _nnc
from jaxalloc.allocators import nnc_2018 as _nnc_2018
from jaxalloc.allocators import search as _search
from jaxalloc.allocators.problem import Allocation, Problem
from jaxalloc.errors import JaxallocError

__all__ = [
    "ALLOCATORS",
    "Allocation",
    "Problem",
    "UnknownAllocatorError",
    "allocate",
    "get_allocator",
    "portfolio",
]


class UnknownAllocatorError(JaxallocError, ValueError):
    """An allocator name or option that is not registered."""


def portfolio() -> dict[str, Callable[..., Allocation]]:
    """The fast registered allocators (all but ``best`` and ``search``), in registry order."""
    return {name: run for name, run in ALLOCATORS.items() if name not in ("best", "search")}


def _run_best(problem: Problem) -> Allocation:
    """Runs every fast registered allocator and keeps the smallest plan."""
    return _best.best(problem, portfolio())


ALLOCATORS: dict[str, Callable[..., Allocation]] = {
    "nnc": _nnc.nnc,
    "nnc-2018": _nnc_2018.nnc_2018,
    "greedy-size": _greedy.greedy_size,
    "greedy-duration": _greedy.greedy_duration,
    "first-fit": _greedy.first_fit,
    "best-fit": _greedy.best_fit,
    "worst-fit": _greedy.worst_fit,
    "beam": _beam.beam,
    "best": _run_best,
    "search": _search.search,
}


def get_allocator(name: str) -> Callable[..., Allocation]:
    """The allocator registered as ``name``; an unknown name raises an error listing the known ones."""
    try:
        return ALLOCATORS[name]
    except KeyError:
        known = ", ".join(ALLOCATORS)
        raise UnknownAllocatorError(f"unknown allocator {name!r}; known allocators: {known}") from None


def allocate(problem: Problem, name: str = "nnc", **options) -> Allocation:
    """Plans ``problem`` with the allocator registered as ``name``, passing it ``options``."""
    run = get_allocator(name)
    params = list(inspect.signature(run).parameters)[1:]
    unknown = sorted(set(options) - set(params))
    if unknown:
        takes = ", ".join(params) if params else "no options"
        raise UnknownAllocatorError(f"allocator {name!r} has no option {unknown[0]!r} (it takes: {takes})")
    return run(problem, **options)
