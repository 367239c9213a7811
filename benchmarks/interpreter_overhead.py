"""Per-op cost of jaxalloc's interpreter, eager and in the arena, against `jax.core.eval_jaxpr`.

All three run the same jaxpr op by op. Eager mode binds each primitive like `eval_jaxpr`;
the difference is the interpreter's own overhead (xDSL dispatch, liveness bookkeeping).
Arena mode runs each op as one jitted kernel that reads its operands from the arena and
writes its results back. Times are the best of `--repeats` calls after a first (compiling)
call. In the first chain every value folds into the output buffer, so its arena is empty;
summing the chain puts every value in the arena. Prints a table.

    python benchmarks/interpreter_overhead.py [--repeats N]
"""

from __future__ import annotations

import argparse
import math
import time

import jax

import jaxalloc
from models import elementwise_chain, elementwise_chain_args, transformer_layer, transformer_layer_args


def summed_chain(x):
    """The chain with its result reduced: every value of the chain lives in the arena."""
    return elementwise_chain(x).sum()


def cases():
    return [
        ("1,000-op chain", elementwise_chain, elementwise_chain_args()),
        ("1,000-op chain, summed", summed_chain, elementwise_chain_args()),
        ("transformer layer", transformer_layer, transformer_layer_args()),
    ]


def best_times(fns, repeats: int, least_seconds: float = 0.0) -> list[float]:
    """The best of `repeats` timings of each function, per call, the timings taken in turns (one of
    each, then again), so that a slow spell of the machine falls on all of them alike. A timing
    covers as many calls, each waited for, as take `least_seconds` (one at least): the best single
    call of a program of tens of microseconds is the timer's and the scheduler's as much as its own."""
    counts = []
    for fn in fns:
        start = time.perf_counter()
        jax.block_until_ready(fn())
        counts.append(max(1, math.ceil(least_seconds / max(time.perf_counter() - start, 1e-9))))
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, calls, spent in zip(fns, counts, times):
            start = time.perf_counter()
            for _ in range(calls):
                jax.block_until_ready(fn())
            spent.append((time.perf_counter() - start) / calls)
    return [min(spent) for spent in times]


def best_time(fn, repeats: int) -> float:
    return best_times([fn], repeats)[0]


def measure(name, fn, args, repeats: int) -> tuple:
    closed = jax.make_jaxpr(fn)(*args)
    ops = len(closed.jaxpr.eqns)
    eager, arena = jaxalloc.planned(fn, mode="eager"), jaxalloc.planned(fn, mode="arena")
    reference = best_time(lambda: jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *args), repeats)
    eager_time = best_time(lambda: eager(*args), repeats)
    arena_time = best_time(lambda: arena(*args), repeats)
    per_op = [t / ops * 1e6 for t in (reference, eager_time, arena_time)]
    return name, ops, eager.last_run.ops, *per_op, eager_time / reference, arena_time / eager_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    repeats = parser.parse_args().repeats
    rows = [measure(name, fn, args, repeats) for name, fn, args in cases()]
    print("per-op times are per jaxpr equation; jx ops also count literals (jx.const) and loop rounds\n")
    header = ["program", "jaxpr eqns", "jx ops", "eval_jaxpr us/op", "eager us/op", "arena us/op", "eager/eval_jaxpr", "arena/eager"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
    for name, ops, interpreted, ref, eager, arena, eager_ratio, arena_ratio in rows:
        cells = [name, f"{ops:,}", f"{interpreted:,}", f"{ref:.1f}", f"{eager:.1f}", f"{arena:.1f}", f"{eager_ratio:.2f}x", f"{arena_ratio:.2f}x"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
