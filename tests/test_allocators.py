"""The allocator registry, the baselines on hand-derived cases, and the quality targets on real traces."""

from __future__ import annotations

import csv
import importlib.util
import time
from pathlib import Path

import numpy as np
import pytest

from jaxalloc.allocators import ALLOCATORS, UnknownAllocatorError, allocate, get_allocator
from jaxalloc.allocators.bound import lower_bound
from jaxalloc.allocators.problem import Allocation, Problem
from jaxalloc.checks.checker import check_allocation
from jaxalloc.errors import JaxallocError

TRACES = Path(__file__).resolve().parents[1] / "benchmarks" / "traces"
NAMES = list(ALLOCATORS)


def plan(problem: Problem, name: str, **options) -> Allocation:
    result = allocate(problem, name, **options)
    check_allocation(problem, result)
    return result


def load_trace(path: Path) -> Problem:
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    column = lambda key: [int(row[key]) for row in rows]  # noqa: E731
    return Problem.from_intervals(column("size"), column("lower"), column("upper"))


def test_registry_names():
    assert NAMES == [
        "nnc",
        "nnc-2018",
        "greedy-size",
        "greedy-duration",
        "first-fit",
        "best-fit",
        "worst-fit",
        "beam",
        "best",
        "search",
    ]


def test_unknown_allocator_lists_the_known_ones():
    with pytest.raises(UnknownAllocatorError, match="unknown allocator 'tlsf'.*nnc, nnc-2018.*best") as info:
        get_allocator("tlsf")
    assert isinstance(info.value, JaxallocError)


def test_unknown_option_is_named():
    p = Problem.from_intervals([1], [0], [1])
    with pytest.raises(UnknownAllocatorError, match="'nnc' has no option 'width'"):
        allocate(p, "nnc", width=3)
    with pytest.raises(ValueError, match="beam width"):
        allocate(p, "beam", width=0)


@pytest.mark.parametrize("name", NAMES)
def test_empty_and_trivial_problems(name):
    empty = Problem.from_intervals([], [], [])
    assert allocate(empty, name).peak == 0
    zeros = Problem.from_intervals([0, 0], [0, 0], [1, 1])
    assert plan(zeros, name).peak == 0
    one = Problem.from_intervals([5], [0], [1], alignment=4)
    result = plan(one, name)
    assert result.offsets.tolist() == [0] and result.peak == 8


# Seven blocks born at 0, each overlapping all the others, stack up in order of birth:
# A 4 [0,5) at 0, B 3 [0,2) at 4, C 1 [0,5) at 7, D 2 [0,2) at 8, G 1 [0,5) at 10, H 4 [0,2) at 11,
# K 1 [0,5) at 15. At 2, B, D and H die. E = 2 [2,5) then meets A [0,4), C [7,8), G [10,11),
# K [15,16): the gaps are [4,7) (3 bytes), [8,10) (2 bytes), [11,15) (4 bytes) and the top, 16.
GAPS = Problem.from_intervals([4, 3, 1, 2, 1, 4, 1, 2], [0, 0, 0, 0, 0, 0, 0, 2], [5, 2, 5, 2, 5, 2, 5, 5])
STACK = [0, 4, 7, 8, 10, 11, 15]


@pytest.mark.parametrize(("name", "offset_of_e"), [("first-fit", 4), ("best-fit", 8), ("worst-fit", 11), ("beam", 8)])
def test_gap_rules_in_order_of_birth(name, offset_of_e):
    result = plan(GAPS, name)
    assert result.offsets.tolist() == STACK + [offset_of_e]
    assert result.peak == 16


def test_greedy_size_best_fit():
    # Order: size descending, then longer lifetime, then index: A 4 [0,2), B 4 [1,3), C 2 [2,4),
    # D 2 [0,1). A at 0. B meets A [0,4): top, 4. C meets B [4,8) only: the gap [0,4) fits, C at 0.
    # D meets A [0,4) only: top, 4. Peak 8 = max-live (A + B at 1).
    p = Problem.from_intervals([4, 4, 2, 2], [0, 1, 2, 0], [2, 3, 4, 1])
    result = plan(p, "greedy-size")
    assert result.offsets.tolist() == [0, 4, 0, 4]
    assert result.peak == lower_bound(p) == 8


def test_longer_lifetime_breaks_size_ties():
    # A 4 [0,2) and B 4 [0,6) overlap: B lives longer, so greedy-size places it first, at 0.
    p = Problem.from_intervals([4, 4], [0, 0], [2, 6])
    assert plan(p, "greedy-size").offsets.tolist() == [4, 0]


def test_greedy_duration_orders_by_lifetime():
    # L 1 [0,10), S1 4 [0,2), S2 4 [2,4). Lifetime order: L, S1, S2. L at 0; S1 meets L: 1;
    # S2 meets L only: the gap above L, 1. By size first, S1 and S2 take 0 and L goes above them.
    p = Problem.from_intervals([1, 4, 4], [0, 0, 2], [10, 2, 4])
    assert plan(p, "greedy-duration").offsets.tolist() == [0, 1, 1]
    assert plan(p, "greedy-size").offsets.tolist() == [4, 0, 0]


@pytest.mark.parametrize("name", NAMES)
def test_companions_share_an_offset(name):
    # X [0,2) and Y [4,6) must share an offset; Z [1,5) overlaps both; W [2,4) fits between them.
    p = Problem.from_intervals([40, 60, 100, 40], [0, 4, 1, 2], [2, 6, 5, 4], companions=[(0, 1)])
    result = plan(p, name)
    assert result.offsets[0] == result.offsets[1]


def random_problem(rng: np.random.Generator, n: int) -> Problem:
    sizes = rng.integers(1, 100, n)
    starts = rng.integers(0, 20, n)
    ends = starts + rng.integers(1, 8, n)
    return Problem.from_intervals(sizes, starts, ends)


def test_beam_of_width_one_is_birth_order_best_fit():
    rng = np.random.default_rng(7)
    for _ in range(200):
        p = random_problem(rng, int(rng.integers(1, 25)))
        assert plan(p, "beam", width=1).offsets.tolist() == plan(p, "best-fit").offsets.tolist()


def test_best_is_never_worse_than_any_allocator():
    rng = np.random.default_rng(11)
    for _ in range(60):
        p = random_problem(rng, int(rng.integers(1, 30)))
        best = plan(p, "best")
        peaks = {name: plan(p, name).peak for name in NAMES if name not in ("best", "search")}
        assert best.peak == min(peaks.values())
        assert peaks[best.allocator] == best.peak


def test_allocators_are_deterministic():
    rng = np.random.default_rng(3)
    p = random_problem(rng, 40)
    for name in NAMES:
        assert allocate(p, name).offsets.tolist() == allocate(p, name).offsets.tolist()


def test_problem_validation():
    with pytest.raises(ValueError, match="empty interval"):
        Problem.from_intervals([1], [3], [3])
    with pytest.raises(ValueError, match="both starts and ends"):
        Problem(sizes=[1], starts=[0])
    with pytest.raises(ValueError, match="non-negative"):
        Problem.from_intervals([-1], [0], [1])
    with pytest.raises(ValueError, match="does not exist"):
        Problem.from_pairs([1, 2], [(0, 2)])
    with pytest.raises(ValueError, match="cannot share an offset"):
        Problem.from_intervals([1, 1], [0, 1], [2, 3], companions=[(0, 1)])
    with pytest.raises(ValueError, match="more than one companion group"):
        Problem.from_intervals([1, 1, 1], [0, 1, 2], [1, 2, 3], companions=[(0, 1), (1, 2)])
    with pytest.raises(ValueError, match="alignment"):
        Problem.from_intervals([1], [0], [1], alignment=0)
    p = Problem.from_pairs([1, 1, 1], [(1, 0), (0, 1), (2, 1)])
    assert p.pairs.tolist() == [[0, 1], [1, 2]]




def test_resnet50_quality_targets():
    p = load_trace(TRACES / "somas/resnet50.csv")
    bound = lower_bound(p)
    assert bound == 1_515_472_556
    ratio = {name: plan(p, name).peak / bound for name in NAMES}
    assert ratio["greedy-size"] == pytest.approx(1.0094, abs=5e-5)
    assert ratio["greedy-duration"] == pytest.approx(1.0045, abs=5e-5)
    assert ratio["nnc"] <= 1.0045
    assert ratio["best"] <= 1.002
    assert ratio["search"] <= 1.001


@pytest.mark.parametrize("letter", "ABCDEFGHIJK")
def test_minimalloc_challenging_best_never_worse_than_baselines(letter):
    p = load_trace(TRACES / f"minimalloc/{letter}.1048576.csv")
    best = plan(p, "best").peak
    baselines = ["greedy-size", "greedy-duration", "first-fit", "best-fit", "worst-fit", "beam"]
    assert best <= min(plan(p, name).peak for name in baselines)
    assert 1.31 <= plan(p, "greedy-size").peak / lower_bound(p) <= 1.42


def synthetic_trace(n_buffers: int = 20_000) -> dict:
    """The benchmark's deterministic training-step trace (benchmarks/ is not a package)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "synthetic_trace.py"
    spec = importlib.util.spec_from_file_location("jaxalloc_bench_synthetic_trace", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.training_step_trace(n_buffers)


def test_synthetic_trace_is_deterministic():
    a, b = synthetic_trace(), synthetic_trace()
    assert len(a["size"]) == 20_000
    for key in ("lower", "upper", "size"):
        assert np.array_equal(a[key], b[key])
    assert np.all(a["upper"] > a["lower"]) and np.all(a["size"] > 0)


def test_nnc_scales_to_20000_buffers():
    # The 10-second target is measured by benchmarks/traces.py --synthetic; this guards against a
    # quadratic Python loop creeping in (that would take minutes), with room for a loaded CI machine.
    data = synthetic_trace()
    p = Problem.from_intervals(data["size"], data["lower"], data["upper"])
    began = time.perf_counter()
    result = allocate(p, "nnc")
    elapsed = time.perf_counter() - began
    check_allocation(p, result)
    assert result.peak <= 1.01 * lower_bound(p)
    assert elapsed < 30
