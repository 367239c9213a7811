"""``search``: hand-made instances where the greedy planners miss the optimum, the time limit, and
agreement with brute force on small random problems. Every plan goes through the checker."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import numpy as np
import pytest

from jaxalloc.allocators import ALLOCATORS, UnknownAllocatorError, allocate, portfolio
from jaxalloc.allocators.bound import lower_bound
from jaxalloc.allocators.problem import Allocation, Problem
from jaxalloc.checks.checker import check_allocation, find_violations
from jaxalloc.cli import main

TRACES = Path(__file__).resolve().parents[1] / "benchmarks" / "traces"


def plan(problem: Problem, name: str = "search", **options) -> Allocation:
    result = allocate(problem, name, **options)
    check_allocation(problem, result)
    return result


def brute_force_optimum(problem: Problem) -> int:
    """The smallest peak by trying every offset in ``0..sum(sizes)`` for every block (tiny problems)."""
    sizes = problem.padded_sizes
    step = problem.alignment
    best = int(sizes.sum())
    for offsets in itertools.product(range(0, int(sizes.sum()) + 1, step), repeat=problem.n):
        peak = int(max(o + s for o, s in zip(offsets, sizes)))
        if peak < best and not find_violations(problem, np.array(offsets)):
            best = peak
    return best


def canonical_optimum(problem: Problem) -> int:
    """The smallest peak over every order of the blocks, each put on the highest conflicting block
    before it (every plan can be lowered into such a one); companions go in together."""
    groups = {i: g for g in problem.companions for i in g}
    units = sorted({tuple(sorted(groups.get(i, (i,)))) for i in range(problem.n)})
    sizes = problem.padded_sizes
    pairs = {tuple(p) for p in problem.pairs.tolist()}

    def conflict(i: int, j: int) -> bool:
        if not sizes[i] or not sizes[j]:
            return False
        timed = problem.has_intervals and problem.starts[i] < problem.ends[j] and problem.starts[j] < problem.ends[i]
        return timed or (min(i, j), max(i, j)) in pairs

    best = None
    for order in itertools.permutations(units):
        offset: dict[int, int] = {}
        for unit in order:
            rest = [offset[j] + int(sizes[j]) for i in unit for j in offset if conflict(i, j)]
            for i in unit:
                offset[i] = max(rest, default=0)
        peak = max((offset[i] + int(sizes[i]) for i in offset), default=0)
        best = peak if best is None else min(best, peak)
    return best or 0


def test_registered_with_a_time_limit_option():
    p = Problem.from_intervals([4, 4], [0, 0], [1, 1])
    assert "search" in ALLOCATORS
    assert plan(p, time_limit=0.5).peak == 8
    with pytest.raises(ValueError, match="time_limit must be a positive"):
        allocate(p, "search", time_limit=0)
    with pytest.raises(UnknownAllocatorError, match="'nnc' has no option 'time_limit'"):
        allocate(p, "nnc", time_limit=1)


def test_best_does_not_run_search():
    assert "search" not in portfolio() and "best" not in portfolio()
    p = Problem.from_intervals([4, 1, 3, 4], [4, 3, 1, 1], [5, 6, 4, 2])
    assert plan(p, "best").allocator != "search"


def test_reaches_the_bound_where_every_greedy_plan_misses_it():
    # A 4 [4,5), B 1 [3,6), C 3 [1,4), D 4 [1,2): max-live 7 (C + D at 1). The greedy plans put the
    # large blocks low (C and D at 0, 3), then B above C and A above B: 8. The optimum puts A at the
    # bottom: C [0,3), D [3,7), A [0,4), B [4,5): every block lives in a 7-byte column.
    p = Problem.from_intervals([4, 1, 3, 4], [4, 3, 1, 1], [5, 6, 4, 2])
    assert plan(p, "best").peak == 8
    result = plan(p)
    assert result.peak == lower_bound(p) == 7
    assert result.proven_optimal is True
    assert result.allocator == "search"


def test_proves_the_bound_unreachable_with_companions():
    # X 2 [1,3) and Y 1 [4,5) share an offset o; C 4 [3,5) and D 3 [1,4) stack in the peak (7 bytes
    # at 3). In 7 bytes: D below C pushes X (beside D) to o >= 3, inside C's column where Y may not
    # be; C below D puts Y above C (o >= 4) and X (2 bytes) into D's column. So 8, found and proven
    # by refuting 7; the greedy plans take 9.
    p = Problem.from_intervals([2, 1, 4, 3], [1, 4, 3, 1], [3, 5, 5, 4], companions=[(0, 1)])
    assert lower_bound(p) == 7
    assert plan(p, "best").peak == 9
    result = plan(p)
    assert result.peak == 8 == brute_force_optimum(p)
    assert result.proven_optimal is True
    assert result.offsets[0] == result.offsets[1]


def test_explicit_pairs_reach_the_optimum():
    # A path of conflicts A 4 - B 1 - D 1 - C 4 (no intervals). Size first puts A and C at 0, B on A
    # and D above both: 6. A at 0, B at 4, D at 0 and C on D: 5, the heaviest pair.
    p = Problem.from_pairs([4, 1, 4, 1], [(0, 1), (1, 3), (2, 3)])
    assert plan(p, "best").peak == 6
    result = plan(p)
    assert result.peak == lower_bound(p) == 5
    assert result.proven_optimal is True


def test_explicit_pairs_optimum_above_the_clique_bound_is_proven():
    # A 5-cycle of conflicts: its cliques are pairs (bound 2 for unit sizes) but it needs 3 colours.
    p = Problem.from_pairs([1] * 5, [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4)])
    assert lower_bound(p) == 2
    result = plan(p)
    assert result.peak == 3
    assert result.proven_optimal is True


def test_alignment_and_mixed_conflicts():
    # Sizes pad to 128, 64, 64, 64; the explicit pair (0, 2) joins blocks that never meet in time,
    # so 2 must go beside 0 ([128, 192)), and 3 under it: 192 bytes, the heaviest clique.
    p = Problem(sizes=[100, 30, 64, 1], starts=[0, 0, 2, 2], ends=[2, 2, 4, 4], pairs=[(0, 2)], alignment=64)
    result = plan(p)
    assert np.all(result.offsets % 64 == 0)
    assert result.peak == canonical_optimum(p) == lower_bound(p) == 192
    assert result.proven_optimal is True


KINDS = ("intervals", "pairs", "mixed", "companions")


def random_problem(rng: np.random.Generator, kind: str, n: int) -> Problem:
    sizes = rng.integers(1, 6, n)
    starts = rng.integers(0, 6, n)
    ends = starts + rng.integers(1, 5, n)
    pairs = rng.integers(0, n, (int(rng.integers(0, 2 * n)), 2)) if kind in ("pairs", "mixed") else np.zeros((0, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    if kind == "pairs":
        return Problem.from_pairs(sizes, pairs)
    companions = ()
    if kind == "companions" and n > 2:
        starts[1], ends[1] = ends[0] + 1, ends[0] + 1 + int(rng.integers(1, 4))
        companions = ((0, 1),)
    return Problem(sizes=sizes, starts=starts, ends=ends, pairs=pairs, companions=companions)


def test_matches_canonical_brute_force_on_small_random_problems():
    rng = np.random.default_rng(2024)
    for trial in range(160):
        p = random_problem(rng, KINDS[trial % 4], int(rng.integers(1, 7)))
        result = plan(p, time_limit=5)
        assert result.proven_optimal is True
        assert result.peak == canonical_optimum(p)
        assert result.peak <= plan(p, "best").peak


def test_matches_exhaustive_offsets_on_tiny_problems():
    # Independent of the canonical-plan argument: every offset of every block is tried.
    rng = np.random.default_rng(7)
    for trial in range(40):
        p = random_problem(rng, KINDS[trial % 4], int(rng.integers(1, 5)))
        p = Problem(sizes=np.minimum(p.sizes, 3), starts=p.starts, ends=p.ends, pairs=p.pairs, companions=p.companions)
        result = plan(p, time_limit=5)
        assert result.proven_optimal is True
        assert result.peak == brute_force_optimum(p)


def dense_pairs_problem(n: int = 80, density: float = 0.15, seed: int = 0) -> Problem:
    """A random conflict graph: its greedy-clique bound is far below any plan, so nothing is proven."""
    rng = np.random.default_rng(seed)
    i, j = np.triu_indices(n, 1)
    keep = rng.random(len(i)) < density
    return Problem.from_pairs(rng.integers(1, 100, n), np.stack([i[keep], j[keep]], axis=1))


def test_time_limit_is_respected_and_the_best_plan_returned():
    p = dense_pairs_problem()
    best = plan(p, "best")
    began = time.perf_counter()
    result = plan(p, time_limit=0.5)
    elapsed = time.perf_counter() - began
    assert elapsed < 0.5 + 1.0  # room for a loaded machine
    assert result.proven_optimal is False
    assert lower_bound(p) <= result.peak <= best.peak


def test_time_limit_on_a_large_interval_problem():
    # 3,000 blocks: the start plan alone takes a good part of the second; search must still stop.
    rng = np.random.default_rng(5)
    n = 3000
    starts = rng.integers(0, 2000, n)
    p = Problem.from_intervals(rng.integers(1, 1 << 12, n), starts, starts + rng.integers(1, 100, n))
    began = time.perf_counter()
    result = plan(p, time_limit=2.0)
    assert time.perf_counter() - began < 2.0 + 1.5
    # never worse than greedy-size, which always runs first; the other fast allocators start only
    # where their expected time fits in half the limit, which a loaded machine may not leave
    assert result.peak <= plan(p, "greedy-size").peak


def test_never_worse_than_best_on_medium_problems():
    rng = np.random.default_rng(13)
    for trial in range(12):
        p = random_problem(rng, KINDS[trial % 4], 40)
        result = plan(p, time_limit=0.3)
        assert lower_bound(p) <= result.peak <= plan(p, "best").peak




@pytest.mark.parametrize("letter", "CG")
def test_minimalloc_challenging_instances_reach_the_bound(letter):
    from jaxalloc.traces import read_trace

    p = read_trace(TRACES / f"minimalloc/{letter}.1048576.csv").problem()
    assert plan(p, "best").peak > 1.2 * lower_bound(p)
    result = plan(p, time_limit=30)
    assert result.peak == lower_bound(p)
    assert result.proven_optimal is True


def test_trace_command_passes_the_time_limit(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("id,lower,upper,size\na,4,5,4\nb,3,6,1\nc,1,4,3\nd,1,2,4\n")
    assert main(["trace", str(trace), "--allocator", "search", "--time-limit", "5"]) == 0
    fields = {line[:14].strip(): line[14:] for line in capsys.readouterr().out.splitlines()}
    assert fields["peak"] == "7 B"
    assert fields["optimal"] == "proven"
    assert main(["trace", str(trace), "--allocator", "nnc", "--time-limit", "5"]) == 2
    assert "--time-limit applies to allocators that search" in capsys.readouterr().err
    assert main(["trace", str(trace), "--allocator", "search", "--time-limit", "0"]) == 2
    assert "--time-limit must be a positive number" in capsys.readouterr().err
