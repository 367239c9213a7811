"""The fast allocators give exactly the offsets of today's slow ones (tests/reference_allocators.py).

Random problems mix every kind of conflict a problem can hold: interval lifetimes (short, long and
equal), explicit pairs (with and without a schedule), companion groups, size-0 blocks, repeated
sizes (so that ties decide) and alignment; and the example traces of benchmarks/traces/.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import reference_allocators as reference
from test_allocators import synthetic_trace

from jaxalloc.allocators import allocate, allocation_graph
from jaxalloc.allocators.problem import Problem
from jaxalloc.traces import read_trace

TRACES = Path(__file__).resolve().parents[1] / "benchmarks" / "traces"
REFERENCES = {
    "nnc": reference.nnc,
    "nnc-2018": reference.nnc_2018,
    "greedy-size": reference.greedy_size,
    "greedy-duration": reference.greedy_duration,
    "first-fit": reference.first_fit,
    "best-fit": reference.best_fit,
    "worst-fit": reference.worst_fit,
    "beam": reference.beam,
}


def random_problem(rng: np.random.Generator) -> Problem:
    """A small problem of a random kind: intervals, pairs or both, maybe companions and alignment."""
    n = int(rng.integers(1, 40))
    kind = rng.choice(["intervals", "pairs", "both"], p=[0.6, 0.15, 0.25])
    sizes = rng.choice(rng.integers(0, 200, size=int(rng.integers(1, 6))), size=n)
    if rng.random() < 0.3:
        sizes = rng.integers(0, 1000, size=n)
    options: dict = {"alignment": int(rng.choice([1, 1, 4, 64]))}
    if kind != "pairs":
        steps = int(rng.integers(2, 3 * n + 3))
        starts = rng.integers(0, steps - 1, size=n)
        short = rng.integers(1, 4, size=n)
        long = rng.integers(1, steps, size=n)
        ends = np.minimum(starts + np.where(rng.random(n) < 0.7, short, long), steps)
        options |= {"starts": starts, "ends": ends}
    if kind != "intervals" and n > 1:
        k = int(rng.integers(0, 2 * n))
        pairs = rng.integers(0, n, size=(k, 2))
        options["pairs"] = pairs[pairs[:, 0] != pairs[:, 1]]
    problem = Problem(sizes=sizes, **options)
    if rng.random() < 0.35:
        problem = Problem(sizes=sizes, companions=_companions(problem, rng), **options)
    return problem


def _companions(problem: Problem, rng: np.random.Generator) -> tuple[tuple[int, ...], ...]:
    """A few groups of blocks that conflict with no other block of their group."""
    groups, used = [], set()
    pair_set = {(int(a), int(b)) for a, b in problem.pairs}
    for _ in range(int(rng.integers(1, 4))):
        group: list[int] = []
        for i in rng.permutation(problem.n)[:8]:
            i = int(i)
            if i in used or any((min(i, j), max(i, j)) in pair_set or problem._overlap(i, j) for j in group):
                continue
            group.append(i)
            if len(group) == int(rng.integers(2, 4)):
                break
        if len(group) > 1:
            groups.append(tuple(group))
            used.update(group)
    return tuple(groups)


def assert_same_plans(problem: Problem, names) -> None:
    for name in names:
        fast, slow = allocate(problem, name), REFERENCES[name](problem)
        assert np.array_equal(fast.offsets, slow.offsets), name
        assert fast.peak == slow.peak, name
        if slow.groups is not None:
            assert np.array_equal(fast.groups, slow.groups), name
            assert np.array_equal(fast.group_sizes, slow.group_sizes), name


@pytest.mark.parametrize("seed", range(8))
def test_random_problems_get_todays_plans(seed):
    """``nnc`` on every problem, each other allocator on every seventh (to keep the suite fast)."""
    rng = np.random.default_rng(seed)
    others = [name for name in REFERENCES if name != "nnc"]
    for i in range(200):
        assert_same_plans(random_problem(rng), ["nnc", others[i % len(others)]])


@pytest.mark.parametrize("path", sorted(TRACES.rglob("*.csv")), ids=lambda p: p.name)
def test_example_traces_get_todays_plans(path):
    assert_same_plans(read_trace(path).problem(), REFERENCES)


def test_a_training_trace_gets_todays_plans():
    data = synthetic_trace(1500)
    problem = Problem.from_intervals(data["size"], data["lower"], data["upper"])
    assert_same_plans(problem, REFERENCES)


@pytest.mark.parametrize("trees", [allocation_graph.LEVEL_TREES, 2])
@pytest.mark.parametrize("open_ends", [False, True])
def test_nnc_2018_variants_get_todays_plans(open_ends, trees, monkeypatch):
    """``nnc-2018`` with and without open ends, on small problems and on 300 blocks of many sizes;
    with 2 trees its leveled graph has fewer capacity thresholds than sizes, and skips the edges
    too small for a size bucket by bucket."""
    monkeypatch.setattr(allocation_graph, "LEVEL_TREES", trees)
    rng = np.random.default_rng(17 + open_ends + 2 * trees)
    problems = [random_problem(rng) for _ in range(40)]
    starts = rng.integers(0, 400, 300)
    problems.append(Problem.from_intervals(rng.integers(1, 500, 300), starts, starts + rng.integers(1, 40, 300)))
    for problem in problems:
        fast = allocate(problem, "nnc-2018", open_ends=open_ends)
        slow = reference.nnc_2018(problem, open_ends=open_ends)
        assert np.array_equal(fast.offsets, slow.offsets) and np.array_equal(fast.groups, slow.groups)
