"""The independent plan checker, the lower bounds, and every allocator on thousands of random problems."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from jaxalloc.allocators import ALLOCATORS, allocate
from jaxalloc.allocators.bound import greedy_clique, lower_bound, max_live
from jaxalloc.allocators.problem import Problem
from jaxalloc.checks.checker import InvalidPlanError, check_allocation, check_plan, find_violations
from jaxalloc.testing.differential import THOROUGH

KINDS = ("intervals", "pairs", "mixed", "companions")


def random_problem(rng: np.random.Generator, kind: str) -> Problem:
    """A small random problem of one kind, with some size-0 blocks and a random alignment."""
    n = int(rng.integers(1, 16))
    sizes = rng.integers(0, 120, n) * (rng.random(n) > 0.05)
    alignment = int(rng.choice([1, 1, 4, 64]))
    starts = rng.integers(0, 12, n)
    ends = starts + rng.integers(1, 6, n)
    pairs = np.zeros((0, 2), np.int64)
    if kind in ("pairs", "mixed") and n > 1:
        k = int(rng.integers(0, n * 2))
        pairs = rng.integers(0, n, (k, 2))
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    if kind == "pairs":
        return Problem.from_pairs(sizes, pairs, alignment=alignment)
    companions = _random_companions(rng, starts, ends) if kind == "companions" else ()
    return Problem(sizes=sizes, starts=starts, ends=ends, pairs=pairs, alignment=alignment, companions=companions)


def _random_companions(rng, starts, ends) -> list[tuple[int, ...]]:
    """Disjoint groups of two or three blocks with pairwise disjoint intervals."""
    free = list(rng.permutation(len(starts)))
    groups = []
    while len(free) >= 2 and rng.random() < 0.7:
        group = [int(free.pop())]
        for candidate in list(free):
            if len(group) == 3 or rng.random() < 0.3:
                continue
            if all(ends[candidate] <= starts[g] or ends[g] <= starts[candidate] for g in group):
                group.append(int(candidate))
                free.remove(candidate)
        if len(group) > 1:
            groups.append(tuple(group))
    return groups


def naive_violating_pairs(problem: Problem, offsets: np.ndarray) -> set[tuple[int, int]]:
    """All conflicting pairs that overlap in memory, by brute force over every pair."""
    a = problem.alignment
    reserved = [-(-int(s) // a) * a for s in problem.sizes]
    explicit = {tuple(sorted(map(int, p))) for p in problem.pairs}
    bad = set()
    for i, j in itertools.combinations(range(len(reserved)), 2):
        if not reserved[i] or not reserved[j]:
            continue
        timed = problem.starts is not None and problem.starts[i] < problem.ends[j] and problem.starts[j] < problem.ends[i]
        if not (timed or (i, j) in explicit):
            continue
        if offsets[i] < offsets[j] + reserved[j] and offsets[j] < offsets[i] + reserved[i]:
            bad.add((i, j))
    return bad


@pytest.mark.parametrize("name", list(ALLOCATORS))
def test_every_allocator_on_random_problems(name):
    rng = np.random.default_rng(20240611)
    problems = 400 if name in ("best", "search") else 2000 if THOROUGH else 1000
    for trial in range(problems):
        p = random_problem(rng, KINDS[trial % len(KINDS)])
        result = allocate(p, name)
        check_allocation(p, result)
        assert result.peak >= lower_bound(p)


@pytest.mark.parametrize("name", ["nnc", "nnc-2018", "greedy-size", "beam"])
def test_allocators_on_random_larger_problems(name):
    rng = np.random.default_rng(99)
    for _ in range(8):
        n = 300
        starts = rng.integers(0, 400, n)
        ends = starts + rng.integers(1, 60, n)
        sizes = rng.integers(1, 1 << 16, n)
        pairs = rng.integers(0, n, (40, 2))
        p = Problem(sizes=sizes, starts=starts, ends=ends, pairs=pairs[pairs[:, 0] != pairs[:, 1]], alignment=8)
        result = allocate(p, name)
        check_allocation(p, result)


def test_checker_matches_brute_force_on_random_plans():
    rng = np.random.default_rng(5)
    for trial in range(1500):
        p = random_problem(rng, KINDS[trial % 3])
        offsets = rng.integers(0, 6, p.n) * p.alignment * 16
        found = find_violations(p, offsets, limit=10**6)
        reported = {tuple(sorted(v.blocks)) for v in found if v.kind == "overlap"}
        assert reported == naive_violating_pairs(p, offsets)


def test_checker_names_each_failure_kind():
    p = Problem(sizes=[8, 8, 8], starts=[0, 0, 4], ends=[2, 2, 6], alignment=4, companions=[(0, 2)])
    check_plan(p, [0, 8, 0], peak=16)
    kinds = lambda offsets, peak=None: {v.kind for v in find_violations(p, offsets, peak)}  # noqa: E731
    assert kinds([0, 4, 0]) == {"overlap"}
    assert kinds([0, 10, 0]) == {"misaligned"}
    assert kinds([0, 8, 8]) == {"companions"}
    assert kinds([-8, 8, -8]) == {"negative"}
    assert kinds([0, 8, 0], peak=24) == {"peak"}
    assert kinds([0, 8]) == {"shape"}
    with pytest.raises(InvalidPlanError, match="conflicting blocks 0 .* and 1 .* overlap"):
        check_plan(p, [0, 4, 0])


def test_checker_reads_half_open_intervals_and_explicit_pairs():
    # [0,2) and [2,4) may share memory; an explicit pair may not.
    p = Problem.from_intervals([8, 8], [0, 2], [2, 4])
    check_plan(p, [0, 0])
    q = Problem(sizes=[8, 8], starts=[0, 2], ends=[2, 4], pairs=[(0, 1)])
    assert [v.kind for v in find_violations(q, [0, 0])] == ["overlap"]


def test_checker_treats_padding_as_reserved():
    # Sizes 5 and 3 padded to 8: offsets 0 and 5 would overlap in the padded bytes.
    p = Problem.from_intervals([5, 3], [0, 0], [1, 1], alignment=1)
    check_plan(p, [0, 5])
    q = Problem.from_intervals([5, 3], [0, 0], [1, 1], alignment=8)
    assert {v.kind for v in find_violations(q, [0, 5])} == {"overlap", "misaligned"}


def test_checker_is_fast_on_many_buffers():
    rng = np.random.default_rng(1)
    n = 20_000
    starts = rng.integers(0, 10_000, n)
    p = Problem.from_intervals(rng.integers(1, 1000, n), starts, starts + rng.integers(1, 200, n))
    result = allocate(p, "greedy-size")
    check_allocation(p, result)


def test_max_live_half_open():
    # [0,2) 10, [2,4) 20, [1,3) 5: at 1 -> 15, at 2 -> 25 (the first block has ended), at 3 -> 20.
    p = Problem.from_intervals([10, 20, 5], [0, 2, 1], [2, 4, 3])
    assert max_live(p) == lower_bound(p) == 25


def test_max_live_uses_padded_sizes():
    p = Problem.from_intervals([1, 1], [0, 0], [1, 1], alignment=64)
    assert max_live(p) == 128


def test_bound_with_explicit_pairs_finds_the_clique():
    # A [0,2) and B [2,4) never meet in time, but they form an explicit pair; C [0,4) overlaps both.
    # {A, B, C} is a clique of the conflict graph: 30, above the max-live 20.
    p = Problem(sizes=[10, 10, 10], starts=[0, 2, 0], ends=[2, 4, 4], pairs=[(0, 1)])
    assert max_live(p) == 20
    assert greedy_clique(p) == 30
    assert lower_bound(p) == 30


def test_bound_of_pairs_only_problem():
    # A triangle of pairs (60) and an isolated large block (70): the bound is the larger, 70.
    p = Problem.from_pairs([10, 20, 30, 70], [(0, 1), (1, 2), (0, 2)])
    assert greedy_clique(p) == 60
    assert lower_bound(p) == 70


def test_bound_never_exceeds_an_optimal_plan():
    # Exhaustive search over offsets on tiny problems: the bound is at most the optimum. Every value
    # in memory of its own is a plan; an offset past the others' sizes, or a plan no lower than the
    # best found, cannot lower the optimum, so neither is checked.
    rng = np.random.default_rng(8)
    for trial in range(80):
        n = int(rng.integers(1, 5))
        sizes = rng.integers(1, 4, n)
        starts = rng.integers(0, 4, n)
        ends = starts + rng.integers(1, 3, n)
        pairs = rng.integers(0, n, (int(rng.integers(0, 3)), 2)) if n > 1 else np.zeros((0, 2))
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        p = Problem(sizes=sizes, starts=starts, ends=ends, pairs=pairs)
        best = total = int(sizes.sum())
        for offsets in itertools.product(*(range(total - int(s) + 1) for s in sizes)):
            peak = max(o + int(s) for o, s in zip(offsets, sizes))
            if peak < best and not find_violations(p, np.array(offsets)):
                best = peak
        assert lower_bound(p) <= best
