"""Every allocator gives the offsets recorded in tests/golden/allocator_offsets.json, and every plan passes
the independent checker (jaxalloc.checks.checker), which shares no code with the allocators.

The problems: seeded random problems that mix every kind of conflict a problem can hold (interval
lifetimes short, long and equal, explicit pairs with and without a schedule, companion groups, size-0
blocks, repeated sizes so that ties decide, alignment), the traces of benchmarks/traces/ and a training
trace. The golden file holds one line per plan: its peak and its offsets, or for a problem of more
than ``RAW_BLOCKS`` blocks the SHA-256 of its offsets as little-endian int64.

An allocator changed on purpose changes its plans: regenerate the file with

    python tests/test_allocator_equivalence.py

and the diff shows which plans moved; review it and commit it with the change.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from jaxalloc.allocators import allocate, allocation_graph
from jaxalloc.allocators.problem import Allocation, Problem
from jaxalloc.checks.checker import InvalidPlanError, check_plan
from jaxalloc.traces import read_trace

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "golden" / "allocator_offsets.json"
TRACES = ROOT / "benchmarks" / "traces"
ALLOCATORS = ("nnc", "nnc-2018", "greedy-size", "greedy-duration", "first-fit", "best-fit", "worst-fit", "beam")
RANDOM_SEEDS = range(8)
RANDOM_PROBLEMS = 60
"""Problems per seed: ``nnc`` plans every one, the other allocators take turns."""
RAW_BLOCKS = 64
NNC_2018_VARIANTS = {
    f"nnc-2018/{'open_ends,' if open_ends else ''}trees={trees}": (open_ends, trees)
    for trees in (allocation_graph.LEVEL_TREES, 2)
    for open_ends in (False, True)
}
"""``nnc-2018`` with and without open ends; with 2 trees its leveled graph has fewer capacity
thresholds than sizes, and skips the edges too small for a size bucket by bucket."""


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


def training_problem(n_buffers: int = 1500) -> Problem:
    """The benchmark's deterministic training-step trace (benchmarks/ is not a package)."""
    path = ROOT / "benchmarks" / "synthetic_trace.py"
    spec = importlib.util.spec_from_file_location("jaxalloc_bench_synthetic_trace", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data = module.training_step_trace(n_buffers)
    return Problem.from_intervals(data["size"], data["lower"], data["upper"])


Plan = tuple[str, Problem, Callable[[], Allocation]]
"""A golden file key, the problem, and the call that plans it."""


def _nnc_2018_variant(problem: Problem, open_ends: bool, trees: int) -> Callable[[], Allocation]:
    def run() -> Allocation:
        with mock.patch.object(allocation_graph, "LEVEL_TREES", trees):
            return allocate(problem, "nnc-2018", open_ends=open_ends)

    return run


def plans(group: str) -> Iterator[Plan]:
    """The plans of one group of problems: ``random/SEED``, ``trace/PATH``, ``training`` or
    a key of ``NNC_2018_VARIANTS``."""
    kind, _, which = group.partition("/")
    if kind == "random":
        rng = np.random.default_rng(int(which))
        others = ALLOCATORS[1:]
        for i in range(RANDOM_PROBLEMS):
            problem = random_problem(rng)
            for name in ("nnc", others[i % len(others)]):
                yield f"{group}/{i} {name}", problem, lambda p=problem, name=name: allocate(p, name)
    elif kind in ("trace", "training"):
        problem = read_trace(TRACES / which).problem() if kind == "trace" else training_problem()
        for name in ALLOCATORS:
            yield f"{group} {name}", problem, lambda name=name: allocate(problem, name)
    else:
        open_ends, trees = NNC_2018_VARIANTS[group]
        rng = np.random.default_rng(17 + open_ends + 2 * trees)
        problems = [random_problem(rng) for _ in range(40)]
        starts = rng.integers(0, 400, 300)
        problems.append(Problem.from_intervals(rng.integers(1, 500, 300), starts, starts + rng.integers(1, 40, 300)))
        for i, problem in enumerate(problems):
            yield f"{group}/{i} nnc-2018", problem, _nnc_2018_variant(problem, open_ends, trees)


GROUPS = (
    [f"random/{seed}" for seed in RANDOM_SEEDS]
    + [f"trace/{path.relative_to(TRACES).as_posix()}" for path in sorted(TRACES.rglob("*.csv"))]
    + ["training"]
    + list(NNC_2018_VARIANTS)
)


def record(problem: Problem, allocation: Allocation) -> dict:
    """What the golden file keeps of a plan."""
    offsets = np.asarray(allocation.offsets, np.int64)
    if problem.n <= RAW_BLOCKS:
        return {"peak": int(allocation.peak), "offsets": offsets.tolist()}
    return {"peak": int(allocation.peak), "sha256": hashlib.sha256(offsets.astype("<i8").tobytes()).hexdigest()}


@cache
def golden() -> dict[str, dict]:
    return json.loads(GOLDEN.read_text())


def difference(key: str, got: dict, want: dict) -> str:
    """One line naming what moved: the peak, and the blocks whose offsets changed."""
    moved = [f"peak {want['peak']} -> {got['peak']}"] if got["peak"] != want["peak"] else []
    if "offsets" in want and "offsets" in got:
        old, new = want["offsets"], got["offsets"]
        moved += [f"block {i}: {a} -> {b}" for i, (a, b) in enumerate(zip(old, new)) if a != b][:10]
    elif got.get("sha256") != want.get("sha256"):
        moved.append("offsets changed")
    return f"{key}: {', '.join(moved)}"


@pytest.mark.parametrize("group", GROUPS)
def test_plans_are_the_golden_ones_and_valid(group):
    """Every plan is valid, and is the recorded one: a change of plans is a change to review."""
    moved = []
    for key, problem, run in plans(group):
        allocation = run()
        try:
            check_plan(problem, allocation.offsets, allocation.peak)
        except InvalidPlanError as error:
            moved.append(f"{key}: {error}")
        if key not in golden():
            moved.append(f"{key}: not in {GOLDEN.name}")
        elif (got := record(problem, allocation)) != golden()[key]:
            moved.append(difference(key, got, golden()[key]))
    if moved:
        pytest.fail("plans differ from the golden ones (regenerate them if on purpose):\n" + "\n".join(moved))


def test_the_golden_file_holds_exactly_the_plans_tested():
    keys = [key for group in GROUPS for key, _, _ in plans(group)]
    assert len(keys) == len(set(keys))
    assert set(keys) == set(golden())


def regenerate() -> None:
    """Writes the golden file, one plan a line in a fixed order, so that its diff shows what moved."""
    lines = [
        f"{json.dumps(key)}: {json.dumps(record(problem, run()))}"
        for group in GROUPS
        for key, problem, run in plans(group)
    ]
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text("{\n" + ",\n".join(lines) + "\n}\n")


if __name__ == "__main__":
    regenerate()
    print(f"wrote {GOLDEN.relative_to(ROOT)}", file=sys.stderr)
