"""Every allocator on the public lifetime traces: peak / max-live bound and planning time.

Prints one Markdown table over ``benchmarks/traces/`` (the traces shipped with the repository): one row per
trace, one column per allocator, each cell ``peak/bound (planning time)``; the ``best`` cell also
names the allocator that won, and the ``search`` cell says ``optimal`` when the plan is proven
optimal (its peak is the bound, or ``peak - alignment`` bytes were proven not to fit). Allocators
that take a time limit (``search``) get ``--time-limit`` seconds, 60 by default. Every plan is
verified by the independent checker first.

    python benchmarks/traces.py                 # the traces in benchmarks/traces/
    python benchmarks/traces.py --synthetic     # and the 20,000-buffer training-step trace
    python benchmarks/traces.py --traces DIR --allocators nnc,best,search --time-limit 10
    python benchmarks/traces.py --scaling       # 10k to 200k buffers: time, peak/bound and memory

``--scaling`` plans the synthetic training-step trace (benchmarks/synthetic_trace.py: short-lived
activations and workspaces, saved activations live until their layer's backward pass, gradient
accumulators live through the step) at 10,000 to 200,000 buffers. Each allocator runs in a fresh
process, which reports its planning time (wall clock and CPU time) and its peak resident memory
(``ru_maxrss``: Python, numpy, jax, the trace and the planner together).
"""

from __future__ import annotations

import argparse
import inspect
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from jaxalloc.allocators import ALLOCATORS, allocate, get_allocator
from jaxalloc.allocators.bound import lower_bound
from jaxalloc.allocators.problem import Problem
from jaxalloc.checks.checker import check_allocation
from jaxalloc.traces import read_trace

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = REPO / "benchmarks" / "traces"
SCALING_SIZES = (10_000, 25_000, 50_000, 100_000, 200_000)
SCALING_ALLOCATORS = "nnc,nnc-2018,greedy-size,greedy-duration,first-fit,best-fit,worst-fit,beam"
"""All but the portfolios built on the others (``best`` adds their times, ``search`` takes its time limit)."""


def trace_files(root: Path) -> list[Path]:
    """SOMAS first, then MiniMalloc's challenging suite A-K, then the rest, each group by name."""
    files = sorted(root.rglob("*.csv"))
    rank = lambda p: (p.parent.name != "somas", not p.name[0].isupper(), str(p))  # noqa: E731
    return sorted(files, key=rank)


def measure(problem: Problem, names: list[str], time_limit: float) -> tuple[int, dict[str, str]]:
    """The bound, and one ``peak/bound (time)`` cell per allocator."""
    bound = lower_bound(problem)
    cells = {}
    for name in names:
        takes_limit = "time_limit" in inspect.signature(get_allocator(name)).parameters
        began = time.perf_counter()
        plan = allocate(problem, name, **({"time_limit": time_limit} if takes_limit else {}))
        elapsed = time.perf_counter() - began
        check_allocation(problem, plan)
        notes = [_seconds(elapsed)]
        if plan.allocator != name:
            notes.append(plan.allocator)
        if plan.proven_optimal:
            notes.append("optimal")
        cells[name] = f"{plan.peak / bound:.4f} ({', '.join(notes)})"
    return bound, cells


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


def print_table(rows: list[tuple[str, int, int, dict[str, str]]], names: list[str]) -> None:
    header = ["trace", "buffers", "bound (B)", *names]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
    for trace, buffers, bound, cells in rows:
        print("| " + " | ".join([trace, f"{buffers:,}", f"{bound:,}", *(cells[n] for n in names)]) + " |")


def training_problem(buffers: int) -> Problem:
    """The synthetic training-step trace with ``buffers`` buffers (benchmarks/synthetic_trace.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from synthetic_trace import training_step_trace

    data = training_step_trace(buffers)
    return Problem.from_intervals(data["size"], data["lower"], data["upper"])


def plan_once(buffers: int, name: str, time_limit: float) -> dict:
    """Plans the training trace of ``buffers`` buffers with one allocator (in this process)."""
    problem = training_problem(buffers)
    takes_limit = "time_limit" in inspect.signature(get_allocator(name)).parameters
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    began, cpu = time.perf_counter(), time.process_time()
    plan = allocate(problem, name, **({"time_limit": time_limit} if takes_limit else {}))
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    check_allocation(problem, plan)
    bound = lower_bound(problem)
    return {"seconds": seconds, "cpu": cpu, "peak": plan.peak, "bound": bound, "rss": rss, "before": before}


def scaling(names: list[str], time_limit: float) -> None:
    """One row per trace size, one ``time, peak/bound, peak memory`` cell per allocator."""
    rows = []
    for buffers in SCALING_SIZES:
        cells, bound = {}, 0
        for name in names:
            command = [sys.executable, __file__, "--plan-once", f"{buffers}:{name}", "--time-limit", str(time_limit)]
            result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
            bound = result["bound"]
            cells[name] = (
                f"{_seconds(result['seconds'])} (cpu {_seconds(result['cpu'])}), {result['peak'] / bound:.4f}, "
                f"{result['rss'] / 2**20:.0f} MiB"
            )
        cells["before"] = f"{result['before'] / 2**20:.0f} MiB"
        rows.append((f"training step, {buffers:,}", buffers, bound, cells))
    print(
        "Cells: planning time (wall clock, and the process's CPU time: they differ when the machine is "
        "shared), peak / max-live bound, peak memory of the planning process (RSS; the "
        "process holds the column 'before' before planning: Python, numpy, jax, the trace). "
        f"Search time limit {time_limit:g} s. Every plan passed the independent checker.\n"
    )
    print_table(rows, ["before", *names])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES, help="folder of MiniMalloc CSV traces")
    parser.add_argument(
        "--allocators", help="comma-separated allocator names (default: all; with --scaling: " + SCALING_ALLOCATORS + ")"
    )
    parser.add_argument("--synthetic", action="store_true", help="also plan the 20,000-buffer synthetic trace")
    parser.add_argument(
        "--time-limit", type=float, default=60.0, metavar="SECONDS", help="for allocators that search (default: 60)"
    )
    parser.add_argument("--scaling", action="store_true", help="plan 10k-200k buffer training traces instead")
    parser.add_argument("--plan-once", metavar="BUFFERS:ALLOCATOR", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.plan_once:
        buffers, name = ns.plan_once.split(":")
        print(json.dumps(plan_once(int(buffers), name, ns.time_limit)))
        return 0
    names = (ns.allocators or (SCALING_ALLOCATORS if ns.scaling else ",".join(ALLOCATORS))).split(",")
    unknown = [name for name in names if name not in ALLOCATORS]
    if unknown:
        parser.error(f"unknown allocator {unknown[0]!r}; known allocators: {', '.join(ALLOCATORS)}")
    if ns.scaling:
        scaling(names, ns.time_limit)
        return 0
    rows = []
    if ns.traces.is_dir():
        for path in trace_files(ns.traces):
            trace = read_trace(path)
            bound, cells = measure(trace.problem(), names, ns.time_limit)
            rows.append((str(path.relative_to(ns.traces)), len(trace.ids), bound, cells))
    else:
        print(f"no traces at {ns.traces}", file=sys.stderr)
    if ns.synthetic:
        problem = training_problem(20_000)
        bound, cells = measure(problem, names, ns.time_limit)
        rows.append(("synthetic training step (benchmarks/synthetic_trace.py)", problem.n, bound, cells))
    print(
        "Cells: peak / max-live bound (planning time; optimal: proven optimal). "
        f"Search time limit {ns.time_limit:g} s. Every plan passed the independent checker.\n"
    )
    print_table(rows, names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
