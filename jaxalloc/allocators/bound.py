"""Lower bounds on the peak of any valid plan, to judge allocators by ``peak / bound``.

Blocks that pairwise conflict must lie side by side, so the total size of any *clique* of the conflict
graph is a lower bound on the arena. Sizes are the padded ones: with aligned offsets, two disjoint
blocks are disjoint after rounding their sizes up too.

- Interval problems: the blocks live at one instant form a clique, and an interval graph has no larger
  one, so the max-live sweep (+size at start, -size at end, per timestamp; half-open, so a block ending
  at ``t`` is not live at ``t``) gives the largest clique weight exactly.
- Explicit pairs: the conflict graph is no longer an interval graph and the largest clique is hard to
  find, so the bound adds cliques grown greedily (heaviest common neighbour first) from the blocks of
  the heaviest explicit pairs, over the whole conflict graph (interval overlaps and pairs). Any clique
  is a valid bound, so the maximum of the sweep and these cliques is one too.
- Every block alone is a clique: the bound is at least the largest block.
"""

from __future__ import annotations

import numpy as np

from jaxalloc.allocators.conflicts import Conflicts
from jaxalloc.allocators.problem import Problem


def max_live(problem: Problem) -> int:
    """The largest total padded size live at one instant (0 without intervals)."""
    if not problem.has_intervals or problem.n == 0:
        return 0
    sizes = problem.padded_sizes
    times = np.concatenate([problem.starts, problem.ends])
    deltas = np.concatenate([sizes, -sizes])
    stamps, where = np.unique(times, return_inverse=True)
    net = np.zeros(len(stamps), np.int64)
    np.add.at(net, where, deltas)
    return int(np.cumsum(net).max())


def greedy_clique(problem: Problem, seeds: int = 32) -> int:
    """The heaviest clique found greedily from the blocks of the heaviest explicit pairs (0 if none)."""
    if not problem.has_pairs:
        return 0
    conflicts = Conflicts(problem)
    sizes = conflicts.sizes
    pairs = problem.pairs
    weight = sizes[pairs[:, 0]] + sizes[pairs[:, 1]]
    heaviest = pairs[np.lexsort((pairs[:, 1], pairs[:, 0], -weight))[:seeds]]
    best = 0
    for seed in dict.fromkeys(int(b) for b in heaviest.ravel()):
        clique_weight = int(sizes[seed])
        candidates = np.flatnonzero(conflicts.mask(seed))
        while len(candidates):
            pick = int(candidates[np.argmax(sizes[candidates])])
            clique_weight += int(sizes[pick])
            candidates = candidates[conflicts.among(pick, candidates)]
        best = max(best, clique_weight)
    return best


def lower_bound(problem: Problem) -> int:
    """A lower bound on the peak: max-live, greedy cliques over explicit pairs, the largest block."""
    largest = int(problem.padded_sizes.max()) if problem.n else 0
    return max(max_live(problem), greedy_clique(problem), largest)
